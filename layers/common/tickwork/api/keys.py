"""The tenant's own API keys: POST/GET /api-keys, DELETE /api-keys/{key_id} (keys:admin), and GET
/api-keys/current, which any key may call to learn its own scopes (the console does, to show what it may do)."""
from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from tickwork.api.models import ApiKeyCreate
from tickwork.api.responses import ApiKeyCreated, ApiKeyList, ApiKeyOut, CurrentKeyOut
from tickwork.api.routes import Caller, KeysAdmin, needs, openapi_responses
from tickwork.store.keys import KeyRow
from tickwork.tenant import apikeys
from tickwork.tenant.access import KEYS_ADMIN
from tickwork.timeutil import rfc3339

router = Router()


@router.post("/api-keys", status_code=201, summary="Create an API key (shown only in this answer)",
             tags=["api keys"], security=needs(KEYS_ADMIN), responses=openapi_responses(201, 400, 403))
def create_key(body: ApiKeyCreate, scope: KeysAdmin) -> ApiKeyCreated:
    row, token = apikeys.create_key(scope, body.name, body.scopes)
    return ApiKeyCreated(id=row.id, name=row.name, prefix=row.prefix, key=token, scopes=row.scopes,
                         created_at=_time(row))


@router.get("/api-keys", summary="List the tenant's API keys (never the keys themselves)", tags=["api keys"],
            security=needs(KEYS_ADMIN), responses=openapi_responses(200))
def list_keys(scope: KeysAdmin) -> ApiKeyList:
    return ApiKeyList(items=[key_out(row) for row in apikeys.list_keys(scope)])


@router.get("/api-keys/current", summary="The API key making this call: its tenant and scopes (no scope needed)",
            tags=["api keys"], security=[{"apiKey": []}], responses=openapi_responses(200, scoped=False))
def current_key(scope: Caller) -> CurrentKeyOut:
    row = apikeys.current_key(scope)
    return CurrentKeyOut(id=row.id, name=row.name, prefix=row.prefix, tenant_id=scope.tenant_id, scopes=row.scopes)


@router.delete("/api-keys/<key_id>", status_code=204, summary="Delete an API key; not the tenant's last one",
               tags=["api keys"], security=needs(KEYS_ADMIN), responses=openapi_responses(204, 404, 409))
def delete_key(key_id: str, scope: KeysAdmin) -> Response[None]:
    apikeys.delete_key(scope, key_id)
    return Response(status_code=204)


def key_out(row: KeyRow) -> ApiKeyOut:
    return ApiKeyOut(id=row.id, name=row.name, prefix=row.prefix, scopes=row.scopes, created_at=_time(row),
                     last_used_at=rfc3339(row.last_used_at))


def _time(row: KeyRow) -> str:
    return rfc3339(row.created_at) or ""
