"""Joining a caller's LLM span with its vLLM ``llm_request`` child, whichever arrives first
(the other half is looked up in the store). Used by the writer inside its transaction."""

from __future__ import annotations

from sqlalchemy import Connection

from collector.ingest.merge import merge
from collector.ingest.normalize import Extract, extract
from collector.store import bulk

Key = tuple[str, str]


def resolve_calls(
    conn: Connection, tenant: str, extracts: dict[Key, Extract], max_text_chars: int
) -> tuple[list[Extract], list[Key], set[Key]]:
    """Pair callers with their engine children (in this batch or already stored).

    Returns the call extracts to upsert and the keys of standalone engine calls to delete
    because they are now merged into their caller's record. Merges with a half that was
    already stored produce a key in both lists' sense: the merged record *updates* a call.
    """
    clients = {k: e for k, e in extracts.items() if e.role == "client"}
    engines = {k: e for k, e in extracts.items() if e.role == "engine"}
    engine_by_parent = {
        (e.trace_id, e.parent_span_id): e for e in engines.values() if e.parent_span_id
    }
    traces = {e.trace_id for e in clients.values()}
    traces |= {e.trace_id for e in engines.values() if e.parent_span_id}
    stored_clients: set[Key] = set()
    stored_engine_by_parent: dict[Key, Key] = {}
    for trace_id, span_id, parent, role in bulk.llm_span_index(conn, tenant, traces):
        if (trace_id, span_id) in extracts:
            continue
        if role == "client":
            stored_clients.add((trace_id, span_id))
        elif role == "engine" and parent:
            stored_engine_by_parent[(trace_id, parent)] = (trace_id, span_id)

    to_load: set[Key] = set()
    pairs: list[tuple[Extract | Key, Extract | Key]] = []
    singles: list[Extract] = []
    merged_engines: set[Key] = set()
    for key, c in clients.items():
        child = engine_by_parent.get(key)
        if child is not None:
            pairs.append((c, child))
            merged_engines.add((child.trace_id, child.span_id))
        elif key in stored_engine_by_parent:
            ek = stored_engine_by_parent[key]
            to_load.add(ek)
            pairs.append((c, ek))
        else:
            singles.append(c)
    for key, e in engines.items():
        if key in merged_engines:
            continue
        parent_key = (e.trace_id, e.parent_span_id or "")
        if e.parent_span_id and parent_key in stored_clients:
            to_load.add(parent_key)
            pairs.append((parent_key, e))
        else:
            singles.append(e)

    loaded: dict[Key, Extract] = {}
    for key, span in bulk.load_spans(conn, tenant, to_load).items():
        ex = extract(span, max_text_chars=max_text_chars)
        if ex is not None:
            loaded[key] = ex
    out = list(singles)
    deletes: list[Key] = []
    updated: set[Key] = set()
    for client_ref, engine_ref in pairs:
        cx = client_ref if isinstance(client_ref, Extract) else loaded.get(client_ref)
        ex = engine_ref if isinstance(engine_ref, Extract) else loaded.get(engine_ref)
        if cx is None or ex is None:  # the stored half is gone (retention); keep what we have
            out.extend(x for x in (cx, ex) if x is not None)
            continue
        out.append(merge(cx, ex))
        deletes.append((ex.trace_id, ex.span_id))
        if not (isinstance(client_ref, Extract) and isinstance(engine_ref, Extract)):
            updated.add((cx.trace_id, cx.span_id))
    return out, deletes, updated
