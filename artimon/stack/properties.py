"""One builder of an agent's properties text (Flume's format, docs/agent.md) from named parts.

::

    agent_properties(
        "a",
        sources={"poll": {"type": "artimon", "zk": zk, "interval": 1, "channels": "ch"}},
        channels={"ch": {"type": "memory"}},
        sinks={"store": {"type": "vhms", "channel": "ch", "zk": zk}},
    )

writes ``a.sources = poll``, ``a.channels = ch``, ``a.sinks = store``, then every key of each
part as ``a.<kind>.<name>.<key> = <value>``, in the order given. A value is written as text;
a list or tuple is joined by spaces (``"channels": ["durable", "landing"]``). ``${NAME}`` is
left as it is, for the agent to substitute at load time. ``sinkgroups`` adds Flume's groups
of sinks (``{"g": {"sinks": "k1 k2", "processor.type": "failover"}}``).

The collector's own parser (``collector_agent.load_properties`` then ``parse_agent``) is
what reads the text back: the builder checks nothing that parser checks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

Keys = Mapping[str, object]
Parts = Mapping[str, Keys]


def _value(value: object) -> str:
    if isinstance(value, list | tuple):
        return " ".join(str(item) for item in value)
    return str(value)


def _comment(text: str) -> str:
    return "".join(f"# {line}".rstrip() + "\n" for line in text.splitlines())


def agent_properties(
    agent: str,
    *,
    sources: Parts,
    channels: Parts,
    sinks: Parts,
    sinkgroups: Parts | None = None,
    comment: str = "",
) -> str:
    """The properties text of ``agent`` (see the module doc); ``comment`` opens it as ``#``
    lines."""
    kinds: Sequence[tuple[str, Parts]] = [("sources", sources), ("channels", channels), ("sinks", sinks)]
    if sinkgroups:
        kinds = [*kinds, ("sinkgroups", sinkgroups)]
    lines = [f"{agent}.{kind} = {' '.join(parts)}" for kind, parts in kinds]
    for kind, parts in kinds:
        for name, keys in parts.items():
            lines += [f"{agent}.{kind}.{name}.{key} = {_value(value)}" for key, value in keys.items()]
    return _comment(comment) + "\n".join(lines) + "\n"
