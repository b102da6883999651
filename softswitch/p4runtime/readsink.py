"""Where reads put the entities they find: straight into ReadResponse messages.

Entities are created in place with `add(kind)` because copying messages is
costly with the pure-Python protobuf runtime this project pins.
"""

from p4.v1 import p4runtime_pb2


class ReadSink:
    def __init__(self, chunk: int = 1000):
        self.chunk = chunk
        self.responses = [p4runtime_pb2.ReadResponse()]

    def add(self, kind: str):
        """A new Entity in the answer; returns its `kind` field (e.g. "table_entry") to fill."""
        current = self.responses[-1]
        if len(current.entities) >= self.chunk:
            current = p4runtime_pb2.ReadResponse()
            self.responses.append(current)
        return getattr(current.entities.add(), kind)

    def __len__(self) -> int:
        return sum(len(r.entities) for r in self.responses)
