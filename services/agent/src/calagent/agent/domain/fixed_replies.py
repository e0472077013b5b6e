"""Fixed replies: what the agent says when there is no result to report (a refusal of
forwarded or quoted words, a replaced false claim, an unavailable model), in the user's language.
"""

from __future__ import annotations

from calagent.contracts.commands import StubOut
from calagent.contracts.display import Lang


def memory_saved_receipt(content: str, lang: Lang) -> str:
    return f"已记住：{content}" if lang == "zh" else f"Noted: {content}"


def confirmation_not_own_words(source: str, lang: Lang) -> str:
    """A confirmation the model asked for after someone else's words (`source`) reached it."""
    return (
        f"确认需要你本人的话：这一轮里有来自「{source}」的内容，它不能确认待定的请求，所以我没有执行。请直接回复“确认”。"
        if lang == "zh"
        else f"A confirmation has to be your own words: this turn carried content from {source}, which "
        'cannot confirm a pending request, so nothing was done. Reply "confirm" yourself.'
    )


def not_consent(lang: Lang) -> str:
    """Before the offer shown again: a confirmation answers only the offer the user was last
    shown, in words that consent to its kind (接受/暂定/拒绝 an invitation, 确认 a change)."""
    return (
        "我没有执行任何操作：只有你对下面这个请求本身的回答才能执行它。"
        if lang == "zh"
        else "Nothing was done: only your own answer to the request below runs it. "
    )


def which_again(lang: Lang) -> str:
    """Before a change's question shown again: the reply named no one event among those found
    (contract §20), so nothing was done."""
    return (
        "我还不知道你指的是哪一个，所以什么也没有改。"
        if lang == "zh"
        else "I still don't know which one you mean, so nothing was changed. "
    )


def held_after(source: str, lang: Lang) -> str:
    """Said after an offer commands held because someone else's words (`source`) asked for it."""
    return (
        f"（这个请求是在读到来自「{source}」的内容之后提出的，不是你自己的话，所以只有你确认后才会执行。）"
        if lang == "zh"
        else f" (This was asked for after content from {source} reached me, not in your own words: "
        "it runs only if you confirm it.)"
    )


# What a write held here was asked to do (contract §19), by tool (`words.TOOL_POLICY`).
_HELD_HERE: dict[str, tuple[str, str]] = {
    "propose_automation": ("建立自动执行的计划", "set up an automation"),
    "undo_change": ("撤销日历上的修改", "take a change on your calendar back"),
    "cancel_schedule_command": ("取消你待定的请求", "cancel your pending request"),
    "add_task": ("添加任务", "add a task"),
    "complete_task": ("把任务标为完成", "mark a task done"),
    "save_memory": ("把内容记作你的记忆", "save something as your memory"),
}


def held_not_own_words(tool: str, source: str, stub: StubOut | None, lang: Lang) -> str:
    """A write the model asked for after someone else's words (`source`) reached it, held here:
    nothing was done, and the user's pending request (`stub`), if any, still waits."""
    zh, en = _HELD_HERE[tool]
    if lang == "zh":
        kept = f"你待定的「{stub.title}」保持不变。" if stub is not None else ""
        return (
            f"要{zh}的请求是在读到来自「{source}」的内容之后提出的，不是你自己的话，所以我没有执行，什么都没有改动。"
            f"{kept}如果你确实要这样做，请用你自己的话告诉我。"
        )
    kept = f' Your pending "{stub.title}" stays as it is.' if stub is not None else ""
    return (
        f"The request to {en} came after content from {source} reached me, not in your own words, so "
        f"I did not do it and nothing changed.{kept} Tell me in your own words if you want that."
    )


def replaced_create_claim(lang: Lang) -> str:
    return (
        "抱歉，我刚才的回答不准确：这次并没有改动你的日历。请再说一次要做的事和时间，我会真正去做。"
        if lang == "zh"
        else "Sorry, that was not accurate: nothing on your calendar was changed. "
        "Tell me again what to do and when, and I will actually do it."
    )


def replaced_read_claim(lang: Lang) -> str:
    return (
        "抱歉，我还没有查看你的日历，不能确定你的安排。要我查一下吗？例如“明天有什么安排”。"
        if lang == "zh"
        else "Sorry, I have not looked at your calendar yet, so I can't say what you have. "
        'Shall I check? e.g. "what\'s on tomorrow".'
    )


def model_unavailable_reply(lang: Lang) -> str:
    return (
        "抱歉，模型服务暂时不可用，我这次没有做任何操作，日历没有变化。请稍后再试。"
        if lang == "zh"
        else "Sorry, the language model is unavailable right now. I did nothing and your calendar is unchanged. "
        "Please try again shortly."
    )


def ask_user_after_errors(lang: Lang) -> str:
    return (
        "抱歉，我没能理解这个时间。能换个说法吗？例如“下周三下午3点”。"
        if lang == "zh"
        else 'Sorry, I could not work out that date or time. Could you say it another way, e.g. "next Wednesday 3pm"?'
    )


def direct_call_refused(message: str, lang: Lang) -> str:
    """A client's own command (no model to retry it) was refused; the reason as commands gave it."""
    if lang == "zh":
        return f"这个操作没有执行：{message}" if message else "这个操作没有执行。"
    return f"That was not done: {message}" if message else "That was not done."
