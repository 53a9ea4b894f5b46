"""Test support every provider shares: the provider contract suite and a local vendor server.

``CONTRACT_CHECKS`` are runner-independent async checks over a :class:`ContractSubject`;
``VendorServer`` is a scripted aiohttp server on 127.0.0.1 for protocol tests.
"""

from __future__ import annotations

from ._contract import CONTRACT_CHECKS, ContractCheck
from ._observe import EngineObservation, ObservedFactory, run_through_engine
from ._subject import ContractSubject, ContractViolation, InvalidConfig, Scenario, open_session
from ._vendor_server import RecordedRequest, ScriptedResponse, VendorServer

__all__ = [
    "CONTRACT_CHECKS",
    "ContractCheck",
    "ContractSubject",
    "ContractViolation",
    "EngineObservation",
    "InvalidConfig",
    "ObservedFactory",
    "RecordedRequest",
    "Scenario",
    "ScriptedResponse",
    "VendorServer",
    "open_session",
    "run_through_engine",
]
