"""Prompts and answers of the seeded support assistant (synthetic, written for the demo)."""

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


def answer_for(topic: str, prompt: str) -> str:
    """The assistant's canned answer for ``topic`` (falls back to a generic reply)."""
    return _ANSWERS.get(topic, "Thanks for reaching out, a support agent will follow up shortly.")
