"""Prompts and answers of the seeded support assistant (synthetic, written for the demo), and
the grade a careful reviewer gives each answer (the simulated reviewers and judge use it)."""

from __future__ import annotations

PROMPTS: tuple[tuple[str, str], ...] = (
    ("billing", "Are prices shown with or without sales tax at checkout?"),
    ("billing", "Can I get a refund for unused months if I downgrade to the free tier?"),
    ("billing", "Why was I charged twice for my Family plan this month?"),
    ("billing", "How do I change the credit card on my Team subscription?"),
    ("account", "I forgot the e-mail address I signed up with. How can I log in?"),
    ("account", "How do I turn on two-factor authentication?"),
    ("account", "Can two people share one Plus account on different phones?"),
    ("shipping", "My order has said 'label created' for five days. Where is it?"),
    ("shipping", "Do you ship to Norway, and how long does it take?"),
    ("shipping", "Can I change the delivery address after the order has shipped?"),
    ("technical", "The app crashes when I open the settings page on Android 14."),
    ("technical", "Sync stopped working after the last update. What should I try?"),
    ("technical", "How do I export all my data as CSV?"),
    ("returns", "What is your return policy for opened headphones?"),
    ("returns", "The blender arrived broken. Do I need to send it back for a replacement?"),
)

_ANSWERS: dict[str, str] = {
    "billing": (
        "Thanks for asking! Prices at checkout include sales tax where it applies; the exact "
        "amount is shown before you pay. Refunds for unused months are issued pro rata to the "
        "original payment method within 5-7 business days."
    ),
    "account": (
        "You can manage this under Settings → Account. If you cannot log in, use 'Forgot "
        "e-mail' on the sign-in page and we will send a hint to your recovery phone number."
    ),
    "shipping": (
        "Orders usually leave our warehouse within 2 business days. If the tracking page has "
        "not changed for more than 4 days, reply here with your order number and we will open "
        "an investigation with the carrier."
    ),
    "technical": (
        "Sorry about that! Please update to the latest version, then clear the app cache "
        "(Settings → Storage → Clear cache). If it still happens, send us the crash report from "
        "Settings → Help → Diagnostics."
    ),
    "returns": (
        "Items can be returned within 30 days. Damaged deliveries are replaced free of charge: "
        "send us a photo and we ship the replacement right away, no need to return the item."
    ),
}


GENERIC_ANSWER = "Thanks for reaching out, a support agent will follow up shortly."
REFUSAL_ANSWER = "I'm sorry, but I can't help with that request."
_FOLLOW_UP = (
    " If anything is still unclear, reply to this message and I will walk you through it step "
    "by step."
)

#: Prompts of the last hours' support-gateway traffic: a release broke sync and users paste
#: their logs (longer prompts, one topic), the shift the seeded drift run finds.
SHIFT_PROMPTS: tuple[tuple[str, str], ...] = (
    (
        "technical",
        "Sync stopped after updating to 4.2.0. Log:\n"
        "E/SyncWorker: HTTP 401 on /v2/sync (token expired)\n"
        "E/SyncWorker: retry 3/3 failed, giving up\n"
        "W/Auth: refresh_token missing from keychain\n"
        "I/App: version=4.2.0 build=4210 os=android-14",
    ),
    (
        "technical",
        "Since this morning's update nothing syncs between my phone and laptop. Here is what "
        "the diagnostics page says:\nlast_sync=never\nqueue=1843 pending changes\n"
        "error=AUTH_REFRESH_FAILED (code 401)\nclient=ios 4.2.0 (4210)",
    ),
    (
        "technical",
        "App 4.2.0 keeps logging me out and sync fails. Crash report:\n"
        "Fatal: NullPointerException in TokenStore.refresh()\n"
        "  at com.example.sync.TokenStore.refresh(TokenStore.kt:88)\n"
        "  at com.example.sync.SyncWorker.doWork(SyncWorker.kt:41)",
    ),
)

#: The grade a careful human reviewer gives each kind of answer on the helpfulness rubric (1-5).
GRADE_EXCELLENT, GRADE_GOOD, GRADE_GENERIC, GRADE_REFUSAL = 5, 4, 2, 1
#: P(excellent, good, generic, refusal) of the answer by arm: the candidate adapter refuses and
#: deflects more often (what the canary and the judges should notice).
ANSWER_MIX: dict[str, tuple[float, float, float, float]] = {
    "baseline": (0.35, 0.50, 0.10, 0.05),
    "candidate": (0.25, 0.45, 0.15, 0.15),
}


def answer_for(topic: str, prompt: str) -> str:
    """The assistant's canned answer for ``topic`` (falls back to a generic reply)."""
    return _ANSWERS.get(topic, GENERIC_ANSWER)


def answer_grades() -> dict[str, int]:
    """Every answer text the seed can send → the grade a careful reviewer gives it (1-5)."""
    grades = {GENERIC_ANSWER: GRADE_GENERIC, REFUSAL_ANSWER: GRADE_REFUSAL}
    for text in _ANSWERS.values():
        grades[text] = GRADE_GOOD
        grades[text + _FOLLOW_UP] = GRADE_EXCELLENT
    return grades


def pick_answer(u: float, topic: str, prompt: str, *, candidate: bool) -> str:
    """The answer sent for ``prompt``, chosen by the uniform draw ``u`` in [0, 1) from
    :data:`ANSWER_MIX` of the arm.

    Raises:
        ValueError: ``u`` outside [0, 1).
    """
    if not 0.0 <= u < 1.0:
        raise ValueError("u must be in [0, 1)")
    p_excellent, p_good, p_generic, _ = ANSWER_MIX["candidate" if candidate else "baseline"]
    if u < p_excellent:
        return answer_for(topic, prompt) + _FOLLOW_UP
    if u < p_excellent + p_good:
        return answer_for(topic, prompt)
    if u < p_excellent + p_good + p_generic:
        return GENERIC_ANSWER
    return REFUSAL_ANSWER
