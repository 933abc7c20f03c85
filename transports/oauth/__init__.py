"""trio_mcp.transports.oauth: OAuth 2.1 sign-in for the HTTP transports (the I/O side; the rules
that need no I/O are in :mod:`trio_mcp.protocol`)."""

from __future__ import annotations

from ._authorizer import DEFAULT_REDIRECT_URI, Authorizer, RefreshUnreachable, open_authorizer
from ._jose import CLIENT_ASSERTION_TYPE, INSTALL_HINT, DPoPKey, client_assertion, jwk_thumbprint
from ._loopback import LoopbackReceiver, open_loopback_receiver
from ._store import FileTokenStore, MemoryTokenStore
from ._types import (
    DEFAULT_CLIENT_NAME,
    AuthorizationPrompt,
    AuthorizationRequest,
    AuthState,
    AuthStatus,
    ClientRecord,
    Credential,
    CredentialKey,
    DeviceAuthorization,
    DevicePrompt,
    Grant,
    OAuthSettings,
    SignIn,
    TokenRecord,
    TokenStore,
)

__all__ = [
    "CLIENT_ASSERTION_TYPE",
    "DEFAULT_CLIENT_NAME",
    "DEFAULT_REDIRECT_URI",
    "INSTALL_HINT",
    "AuthState",
    "AuthStatus",
    "AuthorizationPrompt",
    "AuthorizationRequest",
    "Authorizer",
    "ClientRecord",
    "Credential",
    "CredentialKey",
    "DPoPKey",
    "DeviceAuthorization",
    "DevicePrompt",
    "FileTokenStore",
    "Grant",
    "LoopbackReceiver",
    "MemoryTokenStore",
    "OAuthSettings",
    "RefreshUnreachable",
    "SignIn",
    "TokenRecord",
    "TokenStore",
    "client_assertion",
    "jwk_thumbprint",
    "open_authorizer",
    "open_loopback_receiver",
]
