"""YAML read as data only, with bounds: the safe loader (plain mappings, lists, strings, numbers; no
Python tags), at most MAX_NODES nodes and MAX_ALIASES aliases, nested at most MAX_DEPTH deep, and
at most MAX_EXPANDED_NODES nodes once every alias is expanded (a "billion laughs" alias bomb
composes fast but expands to 10^9 nodes: it is refused before anything walks it). A key repeated in
one mapping is refused too (PyYAML would keep the last value silently; `1` and `true`, or `1` and
`1.0`, are the same Python key). Every failure is one ConfigError line (a control character such as
NUL included); nothing read here is executed.
"""

from __future__ import annotations

from typing import Any

import yaml

from planner.errors import ConfigError

MAX_NODES = 20_000
"""Nodes (scalars, lists, mappings) composed from the text; a full scenario has a few hundred."""
MAX_EXPANDED_NODES = 20_000
"""Nodes once every alias is replaced by what it names."""
MAX_ALIASES = 100
"""Aliases (*name) in one document."""
MAX_DEPTH = 32
"""Deepest nesting of lists and mappings, aliases expanded; scenarios nest 5 deep."""


class _Refused(Exception):
    """A bound of this module was exceeded (raised from inside the composer)."""


class _BoundedLoader(yaml.SafeLoader):
    """yaml.SafeLoader that counts nodes, aliases and depth while it composes (before recursing
    further), so that deep or huge input stops early instead of exhausting the stack or memory."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self.nodes = self.aliases = self.depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise _Refused(f"more than {MAX_ALIASES} aliases (*name)")
            return super().compose_node(parent, index)
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _Refused(f"more than {MAX_NODES:,} values")
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise _Refused(f"nested deeper than {MAX_DEPTH} levels")
            node = super().compose_node(parent, index)
        finally:
            self.depth -= 1
        if isinstance(node, yaml.MappingNode):
            self._unique_keys(node)
        return node

    def _unique_keys(self, node: yaml.MappingNode) -> None:
        """Raise _Refused when two keys of `node` are the same Python key. Only scalar keys can be
        (a list or mapping key is unhashable, which the constructor reports); merge keys (<<) may
        repeat what they merge, as YAML allows."""
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:
                continue
            if first is not key_node:
                raise _Refused(f"the key {_spelled(key_node)} on line {key_node.start_mark.line + 1} repeats the key "
                               f"{_spelled(first)} on line {first.start_mark.line + 1}; a mapping holds each key once")


def _spelled(node: yaml.ScalarNode) -> str:
    """A key as the file spells it, quoted and cut short for a message."""
    text = " ".join(str(node.value).split())
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_expansion(root: yaml.Node) -> None:
    """Raise _Refused when the node graph, aliases expanded, has more than MAX_EXPANDED_NODES nodes,
    is deeper than MAX_DEPTH, or refers to itself. Iterative (no recursion), linear in the nodes
    composed: each node's expanded size and depth are computed once."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            open_.discard(key)
            if size[key] > MAX_EXPANDED_NODES:
                raise _Refused(f"aliases expand to more than {MAX_EXPANDED_NODES:,} values")
            if depth[key] > MAX_DEPTH:
                raise _Refused(f"nested deeper than {MAX_DEPTH} levels once aliases are expanded")
            continue
        if key in size:
            continue
        open_.add(key)
        stack.append((node, True))
        for kid in _children(node):
            if id(kid) in open_:
                raise _Refused("an alias refers to a list or mapping that contains it")
            if id(kid) not in size:
                stack.append((kid, False))


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."


def load_yaml(text: str, what: str) -> Any:
    """The data of one YAML document (None when it is empty); ConfigError naming `what` when it is not
    valid YAML, holds a Python tag, or exceeds a bound of this module."""
    loader = None
    try:
        loader = _BoundedLoader(text)  # the reader refuses a control character (NUL, ...) here already
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node)
        return loader.construct_document(node)
    except _Refused as exc:
        raise ConfigError(f"{what}: refused: {exc}") from None
    except yaml.YAMLError as exc:
        # the loader read a string, which it calls "<unicode string>": `what` names the file already
        detail = _one_line(exc).replace(' in "<unicode string>",', " at")
        raise ConfigError(f"{what}: not valid YAML ({detail})") from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        # e.g. an integer of more digits than Python converts, or a date like 2024-13-45
        raise ConfigError(f"{what}: not valid YAML ({type(exc).__name__}: {_one_line(exc)})") from None
    finally:
        if loader is not None:
            loader.dispose()
