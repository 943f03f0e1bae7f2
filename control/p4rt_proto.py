"""P4Runtime's messages and gRPC service, built from the compiled .proto files the `p4runtime` package carries.

Every `p4runtime` wheel on PyPI so far (1.4.1 to 1.6.0) holds modules that
protoc older than 3.19 generated: protobuf 4 and later refuse to run them
("Descriptors cannot be created directly"), though 1.6.0's metadata asks for
protobuf >= 4.21.6.  Pinning protobuf 3.20 instead would keep hina out of
most current ML stacks.  But each of those modules embeds its .proto file,
compiled (the `serialized_pb` of its FileDescriptor, or the argument of
`AddSerializedFile` in newer generated code).  This module reads those bytes
without running the modules, adds them to a descriptor pool of its own, and
makes the message classes from that pool, which every protobuf from 3.20 on
can do; the gRPC stub and servicer registration are the few lines protoc's
gRPC plugin would write.

    from hina.control.p4rt_proto import p4info, p4runtime, P4RuntimeStub
    req = p4runtime.WriteRequest(device_id=0)
    req.updates.add().type = p4runtime.Update.INSERT
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Callable

import grpc
from google.protobuf import any_pb2, descriptor_pool, message_factory
from google.rpc import status_pb2

# The p4runtime package's modules, dependencies first.
_MODULES = ("p4.config.v1.p4types_pb2", "p4.config.v1.p4info_pb2", "p4.v1.p4data_pb2", "p4.v1.p4runtime_pb2")
SERVICE = "p4.v1.P4Runtime"


def _serialized_file(module: str) -> bytes:
    """The compiled .proto embedded in one of p4runtime's generated modules, read without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ImportError(f"the p4runtime package has no {module} (pip install p4runtime)")
    with open(spec.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read(), spec.origin)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "attr", getattr(node.func, "id", ""))
        if name == "FileDescriptor":  # protoc < 3.20: FileDescriptor(..., serialized_pb=b"...")
            for kw in node.keywords:
                if kw.arg == "serialized_pb":
                    return ast.literal_eval(kw.value)
        if name == "AddSerializedFile" and node.args:  # newer protoc: pool.AddSerializedFile(b"...")
            return ast.literal_eval(node.args[0])
    raise ImportError(f"{spec.origin}: found no compiled .proto in it")


def _pool() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    for dependency in (any_pb2, status_pb2):  # google/protobuf/any.proto, google/rpc/status.proto
        pool.AddSerializedFile(dependency.DESCRIPTOR.serialized_pb)
    for module in _MODULES:
        pool.AddSerializedFile(_serialized_file(module))
    return pool


POOL = _pool()


def message_class(full_name: str) -> type:
    """The message class of `full_name` (for instance 'p4.v1.WriteRequest')."""
    descriptor = POOL.FindMessageTypeByName(full_name)
    if hasattr(message_factory, "GetMessageClass"):  # protobuf >= 4.22
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(POOL).GetPrototype(descriptor)  # protobuf 3.20 to 4.21


class _Package:
    """A proto package's messages as attributes: `p4runtime.WriteRequest`, `p4info.MatchField.EXACT`."""

    def __init__(self, package: str):
        self._package = package

    def __getattr__(self, name: str) -> type:
        try:
            cls = message_class(f"{self._package}.{name}")
        except KeyError:
            raise AttributeError(f"P4Runtime's {self._package} has no message {name!r}") from None
        setattr(self, name, cls)
        return cls


p4info = _Package("p4.config.v1")
p4runtime = _Package("p4.v1")


def _methods():
    """(name, kind, request class, response class) of every method of the P4Runtime service."""
    service = POOL.FindServiceByName(SERVICE)
    for method in service.methods:
        kind = ("stream_" if method.client_streaming else "unary_") + ("stream" if method.server_streaming
                                                                      else "unary")
        yield (method.name, kind, message_class(method.input_type.full_name),
               message_class(method.output_type.full_name))


class P4RuntimeStub:
    """The client side of the service: one callable per method (`stub.Write(request)`)."""

    def __init__(self, channel: grpc.Channel):
        for name, kind, request, response in _methods():
            setattr(self, name, getattr(channel, kind)(f"/{SERVICE}/{name}",
                                                       request_serializer=request.SerializeToString,
                                                       response_deserializer=response.FromString))


def add_servicer(servicer: object, server: grpc.Server) -> None:
    """Serve `servicer`'s methods (named as the service's: `Write`, `StreamChannel`, ...) on `server`;
    a method the servicer lacks answers UNIMPLEMENTED."""
    handlers: dict[str, grpc.RpcMethodHandler] = {}
    for name, kind, request, response in _methods():
        method: Callable | None = getattr(servicer, name, None)
        if method is None:
            continue
        make = getattr(grpc, f"{kind}_rpc_method_handler")
        handlers[name] = make(method, request_deserializer=request.FromString,
                              response_serializer=response.SerializeToString)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))


__all__ = ["POOL", "SERVICE", "P4RuntimeStub", "add_servicer", "message_class", "p4info", "p4runtime"]
