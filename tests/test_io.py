"""parasim.io: every output schema of the workflow is defined there, and nowhere else."""

import ast
from pathlib import Path

import pyarrow as pa

from parasim import io, stages

SRC = Path(__file__).resolve().parents[1] / "src" / "parasim"


def _schema_calls(path: Path) -> list[int]:
    """Lines of ``pa.schema(...)`` / ``pyarrow.schema(...)`` calls in a module."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "schema"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in ("pa", "pyarrow")
        ):
            out.append(node.lineno)
    return out


def test_output_schemas_are_defined_in_io_only():
    offenders = {
        str(p.relative_to(SRC)): lines
        for p in sorted(SRC.rglob("*.py"))
        if p.name != "io.py" and (lines := _schema_calls(p))
    }
    assert not offenders, f"pa.schema(...) outside parasim/io.py: {offenders}"


def _schemas() -> dict[str, pa.Schema]:
    return {k: v for k, v in vars(io).items() if isinstance(v, pa.Schema)}


def test_every_schema_is_what_a_stage_reads_or_writes():
    """The stages' records name their tables' schemas: each is one of io's, and every schema of
    io is read or written by a stage (no second list of schemas to keep)."""
    named = {
        (stage.name, key): schema
        for stage in stages.STAGES
        for key, schema in [*stage.inputs.items(), *stage.outputs.items()]
        if schema is not None
    }
    ours = {id(v): k for k, v in _schemas().items()}
    assert named and {w: s for w, s in named.items() if id(s) not in ours} == {}
    used = {ours[id(s)] for s in named.values()}
    assert set(_schemas()) - used == set(), "schemas no stage reads or writes"


def test_every_schema_names_itself_in_its_metadata():
    schemas = _schemas()
    assert schemas
    # The word pairs were written without it before the schemas moved here; adding it would
    # change the bytes of every word-pairs file.
    assert schemas.pop("WORDPAIRS_SCHEMA").metadata is None
    for name, schema in schemas.items():
        meta = schema.metadata
        assert meta[b"parasim.schema"].decode().upper() + "_SCHEMA" == name
        # the corpus is at version 2 since its grades (issue 49); every other schema at 1
        want = io.CORPUS_SCHEMA_VERSION if name == "CORPUS_SCHEMA" else "1"
        assert meta[b"parasim.schema_version"] == want.encode()


def test_score_columns_follow_the_aspects_and_entity_groups():
    from parasim.amr import ASPECTS, ENTITY_GROUPS

    assert tuple(f"amr_{a}" for a in ASPECTS) == io.AMR_COLUMNS
    assert tuple(f"ent_{g}" for g in ENTITY_GROUPS) == io.ENTITY_COLUMNS
    assert io.SCORES_SCHEMA.names[-len(io.SCORE_COLUMNS) :] == list(io.SCORE_COLUMNS)


def test_stage_packages_export_the_io_schemas():
    from parasim import corpus, divergences, negatives, scores

    assert corpus.CORPUS_SCHEMA is io.CORPUS_SCHEMA
    assert divergences.DIVERGENCES_SCHEMA is io.DIVERGENCES_SCHEMA
    assert negatives.NEGATIVES_SCHEMA is io.NEGATIVES_SCHEMA
    assert scores.SCORES_SCHEMA is io.SCORES_SCHEMA


def test_table_writer_gives_write_tables_file_whatever_the_blocks(tmp_path):
    table = pa.table({"a": list(range(25)), "b": [str(i) * 3 for i in range(25)]})
    for group in (4, 10, 100):
        io.write_table(table, tmp_path / "whole.parquet", row_group_size=group)
        for block in (1, 3, 7, 25):
            with io.TableWriter(tmp_path / "blocks.parquet", table.schema, group) as out:
                for k in range(0, 25, block):
                    out.write(table.slice(k, block))
            assert out.rows == 25
            whole = (tmp_path / "whole.parquet").read_bytes()
            assert (tmp_path / "blocks.parquet").read_bytes() == whole, (group, block)
    io.write_table(table.schema.empty_table(), tmp_path / "whole.parquet")
    with io.TableWriter(tmp_path / "blocks.parquet", table.schema):
        pass  # no block: an empty table, as write_table writes it
    assert (tmp_path / "blocks.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()


def test_table_writer_leaves_no_file_when_a_block_fails(tmp_path):
    table = pa.table({"a": list(range(25))})
    (tmp_path / "out.parquet").write_bytes(b"the last good file")
    try:
        with io.TableWriter(tmp_path / "out.parquet", table.schema, 4) as out:
            out.write(table)
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.parquet"]
    assert (tmp_path / "out.parquet").read_bytes() == b"the last good file"


def test_read_table_filters_while_reading(tmp_path):
    import pyarrow.compute as pc

    io.write_table(pa.table({"k": ["a", "b", "c", "a"], "v": [1, 2, 3, 4]}), tmp_path / "t.parquet")
    kept = io.read_table(tmp_path / "t.parquet", filters=pc.field("k").isin(pa.array(["a", "c"])))
    assert kept.to_pydict() == {"k": ["a", "c", "a"], "v": [1, 3, 4]}
    assert io.column_names(tmp_path / "t.parquet") == ["k", "v"]
