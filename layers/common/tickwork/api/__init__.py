"""The management API (powertools APIGatewayHttpResolver): `functions/api/app.py` resolves HTTP events with
`tickwork.api.app.app`. Importing the package loads none of it, so the authorizer and the admin operation,
which use only a few of its modules, start without the routes, their models and the OpenAPI machinery."""
