"""The only package that imports the `kubernetes` client.

Everything else talks to the API through the small functions here, which exchange plain JSON (dicts) and
raise `ApiError`, so the decision core and the use cases never depend on client models. Hot paths use
`_preload_content=False` and orjson: the v37 client's pydantic models cost milliseconds per object.
"""
