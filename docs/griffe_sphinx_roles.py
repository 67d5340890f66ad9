"""A Griffe extension for the API reference: Sphinx cross-reference roles in docstrings become code spans.

The docstrings are Google style (read by mkdocstrings' python handler, see ``mkdocs.yml``), but many name other
objects with Sphinx roles, which Markdown would print as text. When a package is loaded, every docstring in it is
rewritten before it is parsed::

    :class:`Scenario`                          ->  `Scenario`
    :func:`~geopipe_env.scenario.loader.load_scenario`  ->  `load_scenario`  (a tilde keeps the last name)
    :meth:`title <target>`                     ->  `title`

The roles rewritten are those of Sphinx's Python domain (``class``, ``func``, ``meth``, ``data``, ``attr``,
``mod``, ``exc``, ``obj``, ``const``, ``type``), with or without the ``py:`` prefix. A class that takes its
module's docstring (``__doc__ = __doc__`` in its body, as ``GeoPipeEnv`` does) is given that docstring here too,
since reading the source alone does not resolve the assignment.
"""

from __future__ import annotations

import re
from typing import Any

from griffe import Docstring, Extension, Module, Object

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|data|attr|mod|exc|obj|const|type):`([^`]+)`")
_TITLED = re.compile(r"^(.*?)\s*<[^<>]+>$")


def role_text(target: str) -> str:
    """What a role shows: the title of ``title <target>``, the last name of ``~a.b.c``, else the target."""
    titled = _TITLED.match(target)
    if titled and titled.group(1):
        return titled.group(1)
    if target.startswith("~"):
        return target[1:].rsplit(".", 1)[-1]
    return target


def rewrite_roles(text: str) -> str:
    """``text`` with every Sphinx role replaced by a Markdown code span of what the role shows."""
    return ROLE.sub(lambda m: f"`{role_text(m.group(1))}`", text)


class SphinxRoles(Extension):
    """Rewrite the Sphinx roles of every docstring of a package once it is loaded (before any is parsed)."""

    def on_package(self, *, pkg: Module, **kwargs: Any) -> None:
        _rewrite(pkg, set())


def _rewrite(obj: Object, seen: set[str]) -> None:
    if obj.path in seen:
        return
    seen.add(obj.path)
    if obj.is_class and obj.docstring is None and _takes_module_docstring(obj) and obj.module.docstring is not None:
        obj.docstring = Docstring(obj.module.docstring.value, parent=obj, parser=obj.module.docstring.parser,
                                  parser_options=obj.module.docstring.parser_options)
    if obj.docstring is not None:
        obj.docstring.value = rewrite_roles(obj.docstring.value)
    for member in obj.members.values():
        if not member.is_alias:
            _rewrite(member, seen)


def _takes_module_docstring(cls: Object) -> bool:
    """True for a class whose body sets ``__doc__ = __doc__``."""
    own = cls.members.get("__doc__")
    return own is not None and not own.is_alias and own.is_attribute and str(own.value) == "__doc__"
