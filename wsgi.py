"""The WSGI entry point Gunicorn loads; nothing else belongs here."""

from app.factory import create_app

app = create_app()
