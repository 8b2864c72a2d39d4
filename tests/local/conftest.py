"""The local runtime's tests use the API's fixtures too (its local API Gateway fronts the API function)."""
from tests.integration.conftest import api, api_server  # noqa: F401 (pytest finds fixtures by name here)
