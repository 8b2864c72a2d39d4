"""Secrets (`${secrets.NAME}` in a job's request) and the tenant's Standard Webhooks signing secret.

A secret's value is write-only: no route returns it. The signing secret is the tenant's to verify with,
so it is returned (it is a secret of the tenant's own receivers, not of Tickwork's).
"""
from __future__ import annotations

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import BaseModel, Field

from tickwork.api.models import Timestamp, _Strict
from tickwork.api.pagination import DEFAULT_LIMIT, decode_cursor, encode_cursor, fitted
from tickwork.api.routes import Cursor, JobsReader, Limit, SecretsWriter, needs, openapi_responses
from tickwork.secrets import hosts, vault
from tickwork.store.secrets import SecretRow
from tickwork.tenant import secrets as tenant_secrets
from tickwork.tenant.access import JOBS_READ, SECRETS_WRITE
from tickwork.timeutil import rfc3339

router = Router()


class SecretPut(_Strict):
    # repr=False: powertools logs a route's arguments at DEBUG.
    value: str = Field(description=f"Up to {vault.MAX_VALUE_BYTES} bytes (UTF-8). Never shown again.", repr=False)
    allowed_hosts: list[str] | None = Field(
        None, max_length=hosts.MAX_ALLOWED_HOSTS,
        examples=[["api.example.com", "*.hooks.example.com", "http://internal.example.com:8080"]],
        description=f"Where a request carrying this secret may go, at most {hosts.MAX_ALLOWED_HOSTS}: a host name "
                    "or `*.` and a name (one more label), which means https on port 443, or `http://` or `https://` "
                    "and one, with `:port` for another port; null: anywhere. Left out when replacing a secret: it "
                    "keeps its allowed hosts.")


class SecretOut(BaseModel):
    name: str
    allowed_hosts: list[str] | None = Field(description=(
        "null: the secret may be sent anywhere. A bare host is https on port 443; other entries name their scheme "
        "and port."))
    created_at: Timestamp
    updated_at: Timestamp


class SecretList(BaseModel):
    items: list[SecretOut]
    next_cursor: str | None


class SigningSecretOut(BaseModel):
    secret: str = Field(description="whsec_ and the base64 key: verify webhook-signature with it.",
                        examples=["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"])


@router.put("/secrets/<name>", summary="Create (201) or replace (200) a secret", tags=["secrets"],
            security=needs(SECRETS_WRITE), responses={**openapi_responses(200, 400, 409),
                       201: {"description": "Created", "content": {"application/json": {"model": SecretOut}}}})
def put_secret(name: str, secret: SecretPut, scope: SecretsWriter) -> Response[SecretOut]:
    keep_hosts = "allowed_hosts" not in secret.model_fields_set
    row, created = tenant_secrets.put_secret(scope, name, secret.value, secret.allowed_hosts, keep_hosts)
    return Response(status_code=201 if created else 200, content_type=content_types.APPLICATION_JSON,
                    body=_out(row).model_dump())  # type: ignore[arg-type]  # Response[Model] names the model for the OpenAPI document; the body is it dumped


@router.get("/secrets", summary="List secrets (names only), newest first", tags=["secrets"],
            security=needs(JOBS_READ), responses=openapi_responses(200, 400))
def list_secrets(scope: JobsReader, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None) -> SecretList:
    items, next_key = fitted(tenant_secrets.list_secrets(scope, limit, decode_cursor("secrets", cursor)), _out)
    return SecretList(items=items, next_cursor=encode_cursor("secrets", next_key))


@router.delete("/secrets/<name>", status_code=204, summary="Delete a secret", tags=["secrets"],
               security=needs(SECRETS_WRITE), responses=openapi_responses(204, 404))
def delete_secret(name: str, scope: SecretsWriter) -> Response[None]:
    tenant_secrets.delete_secret(scope, name)
    return Response(status_code=204)


@router.get("/signing-secret", summary="The signing secret (created on first use)", tags=["signing"],
            security=needs(SECRETS_WRITE), responses=openapi_responses(200))
def get_signing_secret(scope: SecretsWriter) -> SigningSecretOut:
    return SigningSecretOut(secret=tenant_secrets.signing_secret(scope))


@router.post("/signing-secret/rotate", summary="Make a new signing secret; the old one signs for 24 h more",
             tags=["signing"], security=needs(SECRETS_WRITE), responses=openapi_responses(200))
def rotate_signing_secret(scope: SecretsWriter) -> SigningSecretOut:
    return SigningSecretOut(secret=tenant_secrets.rotate_signing_secret(scope))


def _out(row: SecretRow) -> SecretOut:
    return SecretOut(name=row.name, allowed_hosts=row.allowed_hosts, created_at=rfc3339(row.created_at) or "",
                     updated_at=rfc3339(row.updated_at) or "")
