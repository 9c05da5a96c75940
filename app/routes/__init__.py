"""The thin HTTP layer: cap the body, decode, call one use case, encode. No decisions here."""
