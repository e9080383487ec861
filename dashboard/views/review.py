"""Review queue: one sample at a time, judge verdict hidden until labelled; keys 1–5 label,
S skips (Streamlit button shortcuts, ignored while typing in the comment box)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import data_quality, ui

ctx = ui.page_context(
    "Review queue",
    "Label the answer on the rubric; the judge's verdict is shown only after you label. "
    "Keyboard: press 1–5 to give that score, S to skip (not while typing a comment); "
    "or Tab to a button and press Enter / Space.",
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
    st.success(last["message"], icon=":material/check_circle:")  # its label: escaped below
    if last.get("judge"):
        st.markdown("**Judge verdict on the sample you just labelled**")
        ui.table(pd.DataFrame(last["judge"]), hide_index=True)

maybe_task = data_quality.next_review(ctx.database_url, ctx.tenant, reviewer)
if maybe_task is None:
    st.info("The queue is empty. 🎉")
    st.stop()
task = maybe_task
why = "audit sample (uniformly drawn)" if task.audit else f"{task.reason.replace('_', ' ')} item"
st.caption(
    f"Item {task.id} · rubric **{ui.md(task.rubric.name)}** · model {ui.md(task.model or '?')} "
    f"· variant {ui.md(task.variant or '-')} · {why}"
)
left, right = st.columns(2)
left.markdown("**Prompt**")
left.text(task.prompt or "(prompt not captured)")
right.markdown("**Answer**")
right.text(task.answer or "(answer not captured)")
levels = task.rubric.scale.levels
names = {int(lv.score): lv.label.replace("_", " ") for lv in levels}
with st.expander(ui.md(f"Rubric: {task.rubric.name} — {task.rubric.description}"), expanded=False):
    st.markdown(
        "\n".join(
            f"- **{lv.score}** {ui.md(names[lv.score])}: {ui.md(lv.description)}" for lv in levels
        )
    )
comment = st.text_input("Comment (optional)", key=f"review_comment_{task.id}")
corrected = st.text_area(
    "Corrected answer (optional)",
    key=f"review_corrected_{task.id}",
    help="What the model should have answered; `driftline export flywheel` turns corrected "
    "answers of flagged calls into fine-tuning examples.",
)


def _submit(score: int | None, skip: bool) -> None:
    stored = data_quality.submit_review(
        ctx.database_url,
        ctx.tenant,
        task.id,
        reviewer,
        score=score,
        comment=comment,
        skip=skip,
        corrected_output=None if skip else corrected,
    )
    verdict = (
        []
        if skip
        else data_quality.judge_verdict(ctx.database_url, ctx.tenant, task.trace_id, task.span_id)
    )
    message = (
        f"Item {task.id}: skipped"
        if skip
        else f"Item {task.id}: labelled {score} "
        f"({ui.md(stored.label or names.get(score or 0, ''))})"
        + (" with a corrected answer" if corrected and corrected.strip() else "")
    )
    st.session_state["review_last"] = {"message": message, "judge": verdict}


buttons = st.columns(len(levels) + 1)
for col, lv in zip(buttons, levels, strict=False):
    col.button(
        f"{lv.score} · {names[lv.score]}",
        key=f"review_score_{task.id}_{lv.score}",
        on_click=_submit,
        args=(int(lv.score), False),
        width="stretch",
        shortcut=str(lv.score) if 0 <= lv.score <= 9 else None,
        help=lv.description,
    )
buttons[-1].button(
    "Skip",
    key=f"review_skip_{task.id}",
    on_click=_submit,
    args=(None, True),
    width="stretch",
    shortcut="S",
)
