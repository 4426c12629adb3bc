"""HTTP front end: the FastAPI app, auth and the error envelope."""
