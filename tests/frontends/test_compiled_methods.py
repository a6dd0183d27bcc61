"""attrs' generated methods from the cache on disk (``actors.frontends._compiled_methods``):
the same code as compiling them, in a process whose string hashes differ from the one
that filled the cache; a changed class or an unreadable file compiled afresh."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = """
import sys
if "--attrs-first" in sys.argv:
    import attrs  # the cache turned on after attrs was imported, not before
import actors.frontends._compiled_methods as cached
compiled = []
_compile = compile
cached.compile = lambda script, filename, *args, **kwargs: (
    compiled.append(filename) or _compile(script, filename, *args, **kwargs))
if sys.argv[1] != "-":
    assert cached.reuse_compiled_methods(sys.argv[1])
"""

METHODS = """
import dis, hashlib, types, attrs
import actors.frontends.headless, bus.messages, trio

def shape(code):
    # Where each instruction's source is; the type hash's columns differ with its digits.
    places = tuple(
        None if code.co_name == "__hash__" and i.opname == "LOAD_CONST" and type(i.argval) is int
        else i.positions
        for i in dis.get_instructions(code)
    )
    consts = tuple(shape(c) if isinstance(c, types.CodeType) else repr(c) for c in code.co_consts)
    return (code.co_code, consts, code.co_names, code.co_varnames, code.co_freevars,
            code.co_filename, code.co_name, code.co_qualname, list(code.co_lines()), places,
            code.co_exceptiontable, code.co_flags, code.co_argcount, code.co_kwonlyargcount)

shapes = {}
for name, module in list(sys.modules.items()):
    if name.startswith(("actors", "bus", "trio", "attr")):
        for cls in vars(module).values():
            if isinstance(cls, type) and attrs.has(cls):
                for method, f in vars(cls).items():
                    code = getattr(f, "__code__", None)
                    if code is not None and code.co_filename.startswith("<attrs generated"):
                        shapes[f"{cls.__module__}.{cls.__qualname__}.{method}"] = shape(code)
print(len(shapes), len(compiled), hashlib.sha256(repr(sorted(shapes.items())).encode()).hexdigest())
"""


def run(code: str, cache: Path | str, seed: int, *args: str, attrs_first: bool = False) -> list[str]:
    """``code`` after the prelude in a fresh process; with ``attrs_first``, attrs is
    imported before the cache is turned on (only the classes ``code`` makes are counted)."""
    env = {**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": str(ROOT)}
    flag = ["--attrs-first"] if attrs_first else []
    done = subprocess.run(
        [sys.executable, "-c", PRELUDE + code, str(cache), *args, *flag],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.split()


def test_methods_from_the_cache_are_the_ones_attrs_compiles(tmp_path: Path) -> None:
    cache = tmp_path / "methods.marshal"
    filled, compiles, _ = run(METHODS, cache, 1)
    assert int(filled) > 150 and int(compiles) > 100, (filled, compiles)
    assert cache.exists()
    # Another process, other string hashes (attrs' __hash__ starts from a hash of the
    # class's name): nothing compiled, attrs' own classes (its validators...) included,
    # and the same code as compiling it there.
    reused = run(METHODS, cache, 2)
    without = run(METHODS, "-", 2)
    assert reused[1] == "0"
    assert reused[0] == without[0] and reused[2] == without[2]
    # Turned on after attrs was imported: attrs' own classes were compiled without it
    # (not counted), the rest come from the cache, the same code.
    late = run(METHODS, cache, 3, attrs_first=True)
    without = run(METHODS, "-", 3)
    assert late[1] == "0" and late[0] == without[0] and late[2] == without[2]


def test_attrs_own_classes_come_from_the_cache_when_it_is_on_before_attrs(tmp_path: Path) -> None:
    cache = tmp_path / "methods.marshal"
    own = """
import attr
modules = sorted({name.rsplit(".", 1)[0].split(" ")[-1] for name in compiled})
valid = attr.validators.instance_of(int)
print(",".join(modules) or "-", type(attr._make.__loader__).__name__, type(attr._make.__spec__.loader).__name__, valid)
"""
    modules, loader, spec_loader, *_ = run(own, cache, 1)
    # attrs' own classes (its validators) made through the cache, attrs' loader its own
    assert "attr.validators" in modules.split(","), modules
    assert loader == spec_loader == "SourceFileLoader"
    modules, _, _, *valid = run(own, cache, 2)
    assert modules == "-" and " ".join(valid) == "<instance_of validator for type <class 'int'>>"


def test_a_class_without_fields_hashes_from_the_cache_as_compiled_here(tmp_path: Path) -> None:
    # Its ``__hash__`` hashes ``(type hash,)``, which the compiler folds into one constant.
    cache = tmp_path / "methods.marshal"
    define = """
import attrs
Empty = attrs.make_class("Empty", [], frozen=True)
print(hash(Empty()), len(compiled))
"""
    assert run(define, cache, 1, attrs_first=True)[1] == "1"
    reused, compiles = run(define, cache, 2, attrs_first=True)
    assert compiles == "0" and reused == run(define, "-", 2, attrs_first=True)[0]
    assert reused != run(define, "-", 1, attrs_first=True)[0]  # the seeds' hashes differ


def test_a_changed_class_is_compiled_afresh(tmp_path: Path) -> None:
    cache = tmp_path / "methods.marshal"
    define = """
import attrs
fields = sys.argv[2].split(",")
Point = attrs.make_class("Point", fields, frozen=True)
point = Point(*range(len(fields)))
print(point, hash(point) == hash(Point(*range(len(fields)))), len(compiled))
"""
    assert run(define, cache, 1, "x,y", attrs_first=True) == ["Point(x=0,", "y=1)", "True", "1"]
    assert run(define, cache, 2, "x,y", attrs_first=True) == ["Point(x=0,", "y=1)", "True", "0"]
    assert run(define, cache, 3, "x,y,z", attrs_first=True) == ["Point(x=0,", "y=1,", "z=2)", "True", "1"]


def test_a_cache_that_cannot_be_read_is_as_good_as_none(tmp_path: Path) -> None:
    cache = tmp_path / "methods.marshal"
    cache.write_bytes(b"\x00not marshal data")
    define = """
import attrs
Point = attrs.make_class("Point", ["x"], frozen=True)
print(Point(x=1), len(compiled))
"""
    assert run(define, cache, 1, attrs_first=True) == ["Point(x=1)", "1"]
    assert run(define, cache, 1, attrs_first=True) == ["Point(x=1)", "0"]  # rewritten by the first
    unwritable = tmp_path / "file" / "methods.marshal"
    (tmp_path / "file").write_text("a file where the cache's directory would be")
    assert run(define, unwritable, 1, attrs_first=True) == ["Point(x=1)", "1"]


def test_the_cache_lives_in_the_users_cache_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors.frontends._compiled_methods import cache_path

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert str(cache_path()).startswith(f"{tmp_path / 'cache' / 'agentbus'}/attrs-methods-")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # ignored, as the XDG spec says
    assert str(cache_path()).startswith(f"{tmp_path / 'home' / '.cache' / 'agentbus'}/")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert str(cache_path()).startswith(f"{tmp_path / 'home' / '.cache' / 'agentbus'}/")


def test_a_cache_past_its_size_keeps_only_what_the_last_process_used(tmp_path: Path) -> None:
    import marshal

    cache = tmp_path / "methods.marshal"
    define = """
import attrs
cached.MAX_ENTRIES = int(sys.argv[3])
for name in sys.argv[2].split(","):
    attrs.make_class(name, ["x"], frozen=True)
print(len(compiled))
"""
    assert run(define, cache, 1, "A,B", "10", attrs_first=True) == ["2"]
    assert run(define, cache, 1, "C", "10", attrs_first=True) == ["1"]
    with open(cache, "rb") as f:
        assert sorted(marshal.load(f)) == [f"<attrs generated methods __main__.{n}>" for n in "ABC"]
    assert run(define, cache, 1, "B,D", "2", attrs_first=True) == ["1"]  # B from the file, D compiled: 4 > 2
    with open(cache, "rb") as f:
        assert sorted(marshal.load(f)) == [f"<attrs generated methods __main__.{n}>" for n in "BD"]
