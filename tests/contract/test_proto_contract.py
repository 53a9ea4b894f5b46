"""The agent control protocol (contracts/proto/wepush/agent/v1/agent.proto) keeps the seed's shape.

The proto is compiled with grpc_tools.protoc (plus mypy-protobuf) into a temporary directory. Structure is
inspected through a private DescriptorPool so this module never registers `wepush.agent.v1` symbols in the
process-wide default pool, where they would clash with the generated package other tests import.
Importability of the generated Python modules is proven in a child interpreter for the same reason.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor, FileDescriptor

REPO_ROOT = Path(__file__).resolve().parents[2]
PROTO_ROOT = REPO_ROOT / "contracts" / "proto"
PROTO_FILE = "wepush/agent/v1/agent.proto"
JSON_SCHEMA_DIR = REPO_ROOT / "contracts" / "jsonschema"
PACKAGE = "wepush.agent.v1"

MESSAGES_NAMED_BY_SEED = (
    "AgentToService",
    "ServiceToAgent",
    "Hello",
    "Welcome",
    "Heartbeat",
    "LeaseOffer",
    "LeaseAck",
    "EventBatch",
    "EventAck",
    "RunCommand",
    "CommandAck",
    "RunCompleted",
    "Draining",
    "DrainRequest",
    "LeaseFence",
    "SecretEnvelope",
    "RunEvent",
    "RunSummary",
)

AGENT_TO_SERVICE_PAYLOAD = {
    "hello": (10, "Hello"),
    "heartbeat": (11, "Heartbeat"),
    "lease_ack": (12, "LeaseAck"),
    "event_batch": (13, "EventBatch"),
    "command_ack": (14, "CommandAck"),
    "run_completed": (15, "RunCompleted"),
    "draining": (16, "Draining"),
}

SERVICE_TO_AGENT_PAYLOAD = {
    "welcome": (10, "Welcome"),
    "lease_offer": (11, "LeaseOffer"),
    "command": (12, "RunCommand"),
    "event_ack": (13, "EventAck"),
    "drain": (14, "DrainRequest"),
}

# Every message that reads or writes state of one lease must be fenceable.
LEASE_SCOPED_MESSAGES = (
    "LeaseOffer",
    "LeaseAck",
    "EventBatch",
    "EventAck",
    "RunCommand",
    "CommandAck",
    "RunCompleted",
    "HeartbeatLease",
    "RecoveredLease",
    "LeaseDirective",
    "SecretEnvelope",
)


@dataclass(frozen=True)
class CompiledProto:
    output_dir: Path
    file: FileDescriptor
    file_proto: descriptor_pb2.FileDescriptorProto

    def message(self, name: str) -> Descriptor:
        return self.file.message_types_by_name[name]

    def enum(self, name: str) -> EnumDescriptor:
        return self.file.enum_types_by_name[name]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> CompiledProto:
    output_dir = tmp_path_factory.mktemp("agent_proto")
    descriptor_set = output_dir / "agent.pb"
    well_known_types = Path(str(resources.files("grpc_tools") / "_proto"))
    mypy_plugin = Path(sys.executable).parent / "protoc-gen-mypy"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{PROTO_ROOT}",
            f"-I{well_known_types}",
            f"--plugin=protoc-gen-mypy={mypy_plugin}",
            f"--python_out={output_dir}",
            f"--grpc_python_out={output_dir}",
            f"--mypy_out={output_dir}",
            f"--descriptor_set_out={descriptor_set}",
            "--include_imports",
            "--include_source_info",
            PROTO_FILE,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr

    file_set = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for file_proto in file_set.file:
        pool.Add(file_proto)
    agent_file_proto = next(f for f in file_set.file if f.name == PROTO_FILE)
    return CompiledProto(output_dir, pool.FindFileByName(PROTO_FILE), agent_file_proto)


def _message_of(field: FieldDescriptor) -> Descriptor:
    assert field.message_type is not None, f"{field.full_name} is not a message field"
    return field.message_type


def _new_frame(compiled: CompiledProto, envelope: str) -> Any:
    # Classes built from a private pool are dynamic, so their attributes are only known at run time.
    return message_factory.GetMessageClass(compiled.message(envelope))()


def _all_messages(file: FileDescriptor) -> Iterator[Descriptor]:
    pending = list(file.message_types_by_name.values())
    while pending:
        message = pending.pop()
        yield message
        pending.extend(message.nested_types)


def test_proto_declares_the_versioned_package(compiled: CompiledProto) -> None:
    assert compiled.file.package == PACKAGE
    assert compiled.file_proto.syntax == "proto3"


def test_generated_python_modules_import_with_a_service_stub(compiled: CompiledProto) -> None:
    # The generated grpc module imports `wepush.agent.v1.agent_pb2`; regular packages in the output dir,
    # first on sys.path, shadow the project's own `wepush.agent` only inside this child interpreter.
    for package_dir in ("wepush/agent", "wepush/agent/v1"):
        (compiled.output_dir / package_dir / "__init__.py").touch()
    probe = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(compiled.output_dir)!r})\n"
        "from wepush.agent.v1 import agent_pb2, agent_pb2_grpc\n"
        "print(json.dumps({\n"
        "    'messages': sorted(agent_pb2.DESCRIPTOR.message_types_by_name),\n"
        "    'grpc': [n for n in ('AgentControlServiceStub', 'AgentControlServiceServicer',\n"
        "             'add_AgentControlServiceServicer_to_server') if hasattr(agent_pb2_grpc, n)],\n"
        "}))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-W", "error", "-c", probe], capture_output=True, text=True, check=False
    )
    assert completed.returncode == 0, completed.stderr
    imported = json.loads(completed.stdout)
    assert set(MESSAGES_NAMED_BY_SEED) <= set(imported["messages"])
    assert imported["grpc"] == [
        "AgentControlServiceStub",
        "AgentControlServiceServicer",
        "add_AgentControlServiceServicer_to_server",
    ]


def test_mypy_stubs_declare_every_message(compiled: CompiledProto) -> None:
    stub = (compiled.output_dir / "wepush/agent/v1/agent_pb2.pyi").read_text(encoding="utf-8")
    for name in compiled.file.message_types_by_name:
        assert f"class {name}(" in stub, name


@pytest.mark.parametrize("name", MESSAGES_NAMED_BY_SEED)
def test_every_message_named_by_the_seed_exists(compiled: CompiledProto, name: str) -> None:
    assert name in compiled.file.message_types_by_name


def test_connect_is_a_bidirectional_stream(compiled: CompiledProto) -> None:
    (service,) = compiled.file_proto.service
    assert service.name == "AgentControlService"
    (method,) = service.method
    assert method.name == "Connect"
    assert method.input_type == f".{PACKAGE}.AgentToService"
    assert method.output_type == f".{PACKAGE}.ServiceToAgent"
    assert method.client_streaming
    assert method.server_streaming


@pytest.mark.parametrize(
    ("envelope", "expected_payload", "header_fields"),
    [
        (
            "AgentToService",
            AGENT_TO_SERVICE_PAYLOAD,
            {
                "agent_id": (1, FieldDescriptor.TYPE_STRING),
                "sequence": (2, FieldDescriptor.TYPE_UINT64),
                "acked_service_sequence": (3, FieldDescriptor.TYPE_UINT64),
            },
        ),
        (
            "ServiceToAgent",
            SERVICE_TO_AGENT_PAYLOAD,
            {
                "sequence": (1, FieldDescriptor.TYPE_UINT64),
                "acked_agent_sequence": (2, FieldDescriptor.TYPE_UINT64),
            },
        ),
    ],
)
def test_envelope_oneof_carries_exactly_the_seed_payloads(
    compiled: CompiledProto,
    envelope: str,
    expected_payload: dict[str, tuple[int, str]],
    header_fields: dict[str, tuple[int, int]],
) -> None:
    message = compiled.message(envelope)
    payload = message.oneofs_by_name["payload"]
    actual_payload = {f.name: (f.number, _message_of(f).name) for f in payload.fields}
    assert actual_payload == expected_payload
    actual_header = {f.name: (f.number, f.type) for f in message.fields if f.containing_oneof is None}
    assert actual_header == header_fields


def test_lease_fence_is_lease_id_epoch_and_fencing_token(compiled: CompiledProto) -> None:
    fence = compiled.message("LeaseFence")
    assert [(f.name, f.number, f.type) for f in fence.fields] == [
        ("lease_id", 1, FieldDescriptor.TYPE_STRING),
        ("epoch", 2, FieldDescriptor.TYPE_UINT64),
        ("fencing_token", 3, FieldDescriptor.TYPE_STRING),
    ]


@pytest.mark.parametrize("name", LEASE_SCOPED_MESSAGES)
def test_every_lease_scoped_message_embeds_a_lease_fence(compiled: CompiledProto, name: str) -> None:
    fence_fields = [
        f
        for f in compiled.message(name).fields
        if f.message_type is not None and f.message_type.full_name == f"{PACKAGE}.LeaseFence"
    ]
    assert len(fence_fields) == 1
    assert not fence_fields[0].is_repeated


def test_heartbeat_reports_each_lease_with_its_fence(compiled: CompiledProto) -> None:
    leases = compiled.message("Heartbeat").fields_by_name["leases"]
    assert leases.is_repeated
    assert _message_of(leases).name == "HeartbeatLease"


def test_fence_parts_never_travel_outside_lease_fence(compiled: CompiledProto) -> None:
    loose = [
        f"{message.name}.{field.name}"
        for message in _all_messages(compiled.file)
        if message.name != "LeaseFence"
        for field in message.fields
        if field.name in {"lease_id", "epoch", "fencing_token"}
    ]
    assert loose == []


def test_every_sequence_field_is_uint64(compiled: CompiledProto) -> None:
    sequence_fields = {
        f"{message.name}.{field.name}": field.type
        for message in _all_messages(compiled.file)
        for field in message.fields
        if field.name == "sequence" or "_sequence" in field.name or field.name == "resend_from"
    }
    assert len(sequence_fields) >= 15
    assert {name for name, kind in sequence_fields.items() if kind != FieldDescriptor.TYPE_UINT64} == set()


def test_every_enum_is_prefixed_and_starts_unspecified(compiled: CompiledProto) -> None:
    for enum in compiled.file.enum_types_by_name.values():
        prefix = "".join(f"_{c}" if c.isupper() else c.upper() for c in enum.name).lstrip("_") + "_"
        assert enum.values_by_number[0].name == f"{prefix}UNSPECIFIED", enum.name
        assert all(v.name.startswith(prefix) for v in enum.values), enum.name


def test_instants_are_timestamps_and_spans_are_durations(compiled: CompiledProto) -> None:
    kinds: dict[str, str] = {}
    for message in _all_messages(compiled.file):
        for field in message.fields:
            is_instant = field.name.endswith("_at") or field.name in {"server_time", "deadline"}
            if is_instant or field.name in {"heartbeat_interval", "grace_period"}:
                kinds[f"{message.name}.{field.name}"] = _message_of(field).full_name
    assert kinds["Welcome.server_time"] == "google.protobuf.Timestamp"
    assert kinds["Welcome.heartbeat_interval"] == "google.protobuf.Duration"
    assert kinds["Draining.grace_period"] == "google.protobuf.Duration"
    instants = {k: v for k, v in kinds.items() if not k.endswith(("_interval", "grace_period"))}
    assert set(instants.values()) == {"google.protobuf.Timestamp"}


def test_hello_publishes_recovery_cursors_and_session_key(compiled: CompiledProto) -> None:
    hello = compiled.message("Hello").fields_by_name
    assert hello["session_public_key"].type == FieldDescriptor.TYPE_BYTES
    assert hello["protocol_versions"].is_repeated
    assert set(_message_of(hello["providers"]).fields_by_name) == {"id", "version", "spi_version", "digest"}
    assert set(_message_of(hello["capacity"]).fields_by_name) == {
        "max_runs",
        "max_concurrency",
        "available_concurrency",
    }
    recovery = _message_of(hello["recovery"]).fields_by_name
    assert "last_acked_service_sequence" in recovery
    open_lease = _message_of(recovery["open_leases"]).fields_by_name
    assert {"fence", "run_id", "last_event_sequence", "outbox_first_sequence", "outbox_last_sequence"} <= set(
        open_lease
    )


def test_welcome_directs_each_recovered_lease(compiled: CompiledProto) -> None:
    directive = _message_of(compiled.message("Welcome").fields_by_name["lease_directives"])
    action_enum = directive.fields_by_name["action"].enum_type
    assert action_enum is not None
    actions = [v.name for v in action_enum.values]
    assert actions == [
        "LEASE_DIRECTIVE_ACTION_UNSPECIFIED",
        "LEASE_DIRECTIVE_ACTION_CONTINUE",
        "LEASE_DIRECTIVE_ACTION_STOP",
        "LEASE_DIRECTIVE_ACTION_RESYNC",
    ]


def test_run_command_payload_matches_its_command_types(compiled: CompiledProto) -> None:
    command = compiled.message("RunCommand")
    payload = {f.name: _message_of(f).name for f in command.oneofs_by_name["payload"].fields}
    assert payload == {"cancel": "CancelPayload", "change_concurrency": "ChangeConcurrencyPayload"}
    assert [v.name for v in compiled.enum("RunCommandType").values][1:] == [
        "RUN_COMMAND_TYPE_PAUSE",
        "RUN_COMMAND_TYPE_RESUME",
        "RUN_COMMAND_TYPE_CANCEL",
        "RUN_COMMAND_TYPE_CHANGE_CONCURRENCY",
    ]
    assert [v.name for v in compiled.enum("CommandOutcome").values][1:] == [
        "COMMAND_OUTCOME_APPLIED",
        "COMMAND_OUTCOME_REJECTED",
        "COMMAND_OUTCOME_DUPLICATE",
    ]


def test_secret_envelope_names_its_algorithm_and_binding(compiled: CompiledProto) -> None:
    envelope = compiled.message("SecretEnvelope").fields_by_name
    for name in ("ephemeral_public_key", "nonce", "ciphertext"):
        assert envelope[name].type == FieldDescriptor.TYPE_BYTES
    assert {"algorithm", "key_id", "agent_id", "run_id", "fence", "expires_at"} <= set(envelope)
    source = (PROTO_ROOT / PROTO_FILE).read_text(encoding="utf-8")
    assert '"X25519-HKDF-SHA256-AES256GCM"' in source


def test_header_documents_limits_and_out_of_band_data() -> None:
    header = (PROTO_ROOT / PROTO_FILE).read_text(encoding="utf-8").split("syntax =", 1)[0]
    for fact in ("4 MiB", "512 KiB", "64 KiB", "1000 events", "Audience recipients, item results, run logs"):
        assert fact in header, fact


def test_event_ack_distinguishes_unset_resend_from_resend_from_zero(compiled: CompiledProto) -> None:
    frame = _new_frame(compiled, "ServiceToAgent")
    frame.sequence = 7
    frame.event_ack.run_id = "run-1"
    frame.event_ack.last_contiguous_sequence = 41
    assert not frame.event_ack.HasField("resend_from")

    frame.event_ack.resend_from = 0
    decoded = type(frame).FromString(frame.SerializeToString())
    assert decoded.WhichOneof("payload") == "event_ack"
    assert decoded.event_ack.HasField("resend_from")
    assert decoded.event_ack.resend_from == 0


def test_lease_offer_round_trips_with_fence_and_locators(compiled: CompiledProto) -> None:
    frame = _new_frame(compiled, "ServiceToAgent")
    offer = frame.lease_offer
    offer.fence.lease_id = "lease-1"
    offer.fence.epoch = 3
    offer.fence.fencing_token = "opaque"
    offer.run_id = "run-1"
    offer.audience.sha256 = "ab" * 32
    offer.audience.recipient_count = 100_000
    offer.secret_envelope.algorithm = "X25519-HKDF-SHA256-AES256GCM"
    offer.secret_envelope.fence.CopyFrom(offer.fence)

    decoded = type(frame).FromString(frame.SerializeToString())
    assert decoded.WhichOneof("payload") == "lease_offer"
    assert decoded.lease_offer.fence.epoch == 3
    assert decoded.lease_offer.secret_envelope.fence == decoded.lease_offer.fence
    assert decoded.lease_offer.audience.recipient_count == 100_000


def _json_enum(file_name: str, pointer: tuple[str, ...] = ()) -> list[str]:
    node = json.loads((JSON_SCHEMA_DIR / file_name).read_text(encoding="utf-8"))
    for key in pointer:
        node = node[key]
    return list(node["enum"])


@pytest.mark.parametrize(
    ("proto_enum", "json_file", "pointer"),
    [
        ("ErrorCategory", "error-category.schema.json", ()),
        ("RunEventType", "run-event.schema.json", ("$defs", "RunEventType")),
        ("ArtifactType", "run-summary.schema.json", ("$defs", "ArtifactType")),
        ("RunCommandType", "run-event.schema.json", ("$defs", "RunCommandType")),
        ("CommandOutcome", "run-event.schema.json", ("$defs", "CommandOutcome")),
    ],
)
def test_proto_enums_mirror_the_json_schema_enums(
    compiled: CompiledProto, proto_enum: str, json_file: str, pointer: tuple[str, ...]
) -> None:
    enum = compiled.enum(proto_enum)
    prefix = enum.values_by_number[0].name.removesuffix("UNSPECIFIED")
    proto_values = [v.name.removeprefix(prefix) for v in enum.values if v.number != 0]
    assert proto_values == _json_enum(json_file, pointer)


def test_run_summary_final_states_exist_as_proto_run_states(compiled: CompiledProto) -> None:
    run_states = {v.name.removeprefix("RUN_STATE_") for v in compiled.enum("RunState").values}
    assert set(_json_enum("run-summary.schema.json", ("$defs", "FinalRunState"))) <= run_states
    summary_fields = set(compiled.message("RunSummary").fields_by_name)
    assert {"total", "succeeded", "failed", "unknown", "unsent", "skipped", "retried", "final_state"} <= (
        summary_fields
    )
