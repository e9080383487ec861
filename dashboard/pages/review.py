"""Review queue: one sample at a time, judge verdict hidden until labelled; keys 1–5, s, n."""

from __future__ import annotations

import streamlit as st

from dashboard import data_quality, ui

ctx = ui.page_context(
    "Review queue",
    "Label the answer on the rubric. Keyboard: Tab to a score button, Enter/Space to press.",
)
if not data_quality.review_ready(ctx.database_url):
    ui.no_data("review queue", "The judges review queue has not been installed / migrated yet.")
    st.stop()
if not ctx.allows("review"):
    st.warning(f"This key (role {ctx.principal.role}) may not label samples.")
    st.stop()
reviewer = ctx.actor
progress = data_quality.review_progress(ctx.database_url, ctx.tenant, reviewer)
done = progress["labelled"] + progress["skipped"]
st.progress(
    done / (done + progress["open"]) if done + progress["open"] else 1.0,
    text=f"Today: {progress['labelled']} labelled, {progress['skipped']} skipped · "
    f"{progress['open']} left in the queue",
)
last = st.session_state.get("review_last")
if last:
    st.success(last["message"])
    if last.get("judge") is not None:
        with st.expander("Judge verdict on the sample you just labelled", expanded=True):
            st.write(last["judge"])

maybe_task = data_quality.next_review(ctx.database_url, ctx.tenant, reviewer)
if maybe_task is None:
    st.info("The queue is empty. 🎉")
    st.stop()
task = maybe_task
meta = f"rubric **{task.rubric.name}** · model {task.model or '?'} · variant {task.variant or '-'}"
st.caption(meta + (" · audit sample" if task.audit else f" · {task.reason}"))
left, right = st.columns(2)
left.markdown("**Prompt**")
left.text(task.prompt or "(prompt not captured)")
right.markdown("**Answer**")
right.text(task.answer or "(answer not captured)")
with st.expander("Rubric", expanded=False):
    st.write(getattr(task.rubric, "description", "") or task.rubric.name)
comment = st.text_input("Comment (optional)", key=f"review_comment_{task.id}")
levels = [lv for lv in task.rubric.scale.levels] if hasattr(task.rubric.scale, "levels") else []
scores = [int(lv.score) for lv in levels] if levels else [1, 2, 3, 4, 5]
names = {int(lv.score): getattr(lv, "label", str(lv.score)) for lv in levels}


def _submit(score: int | None, skip: bool) -> None:
    stored = data_quality.submit_review(
        ctx.database_url, ctx.tenant, task.id, reviewer, score=score, comment=comment, skip=skip
    )
    judge = None
    if not skip:
        detail = data_quality.judge_verdict(
            ctx.database_url, ctx.tenant, task.trace_id, task.span_id
        )
        judge = detail
    st.session_state["review_last"] = {
        "message": f"Item {task.id}: skipped"
        if skip
        else f"Item {task.id}: labelled {stored.label or score}",
        "judge": judge,
    }


buttons = st.columns(len(scores) + 1)
for col, sc in zip(buttons, scores, strict=False):
    col.button(
        f"{sc} · {names.get(sc, '')}".strip(" ·"),
        key=f"review_score_{task.id}_{sc}",
        on_click=_submit,
        args=(sc, False),
        width="stretch",
    )
buttons[-1].button(
    "Skip", key=f"review_skip_{task.id}", on_click=_submit, args=(None, True), width="stretch"
)
