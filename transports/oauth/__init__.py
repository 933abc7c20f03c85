"""trio_mcp.transports.oauth: OAuth 2.1 sign-in for the HTTP transports (the I/O side; the rules
that need no I/O are in :mod:`trio_mcp.protocol`)."""

from __future__ import annotations

from ._loopback import LoopbackReceiver, open_loopback_receiver
from ._store import MemoryTokenStore
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
    "DEFAULT_CLIENT_NAME",
    "AuthState",
    "AuthStatus",
    "AuthorizationPrompt",
    "AuthorizationRequest",
    "ClientRecord",
    "Credential",
    "CredentialKey",
    "DeviceAuthorization",
    "DevicePrompt",
    "Grant",
    "LoopbackReceiver",
    "MemoryTokenStore",
    "OAuthSettings",
    "SignIn",
    "TokenRecord",
    "TokenStore",
    "open_loopback_receiver",
]
