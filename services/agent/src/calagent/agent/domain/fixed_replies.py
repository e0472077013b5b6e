"""Fixed replies: what the agent says when there is no result to report (a refusal of
forwarded or quoted words, a replaced false claim, an unavailable model), in the user's language.
"""

from __future__ import annotations

from calagent.contracts.commands import StubOut
from calagent.contracts.display import Lang


def memory_saved_receipt(content: str, lang: Lang) -> str:
    return f"已记住：{content}" if lang == "zh" else f"Noted: {content}"


def confirmation_not_own_words(lang: Lang) -> str:
    return (
        "确认需要你本人的话，转发或引用的内容不能确认待定的日程。请直接回复“确认”。"
        if lang == "zh"
        else 'A confirmation has to be your own words, not forwarded or quoted content. Reply "confirm" yourself.'
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


def undo_not_own_words(lang: Lang) -> str:
    return (
        "撤销需要你本人的话，转发或引用的内容不能撤销日历上的修改。日历没有变化。"
        if lang == "zh"
        else "Taking a change back has to be your own words, not forwarded or quoted content. Nothing changed."
    )


def cancel_not_own_words(stub: StubOut | None, lang: Lang) -> str:
    """A cancel asked for by forwarded or quoted content: held, the pending request stays."""
    if stub is None:
        return (
            "转发或引用的内容要求取消，但你现在没有待定的日程，什么都没有改动。"
            if lang == "zh"
            else "Forwarded or quoted content asks to cancel something, but nothing is pending; nothing was changed."
        )
    return (
        f"转发或引用的内容要求取消「{stub.title}」，我没有取消，它仍在等你。如果你要取消，请亲自说“取消”。"
        if lang == "zh"
        else f'Forwarded or quoted content asks to cancel "{stub.title}"; I have not cancelled it and it is '
        'still pending. If you want it cancelled, say "cancel" yourself.'
    )


def task_not_own_words(lang: Lang) -> str:
    return (
        "这段内容来自转发或引用，我没有据此添加或完成任务。如果需要，请用你自己的话告诉我。"
        if lang == "zh"
        else "That comes from forwarded or quoted content, so I have not added or completed a task "
        "from it. Tell me in your own words if you want that."
    )


def memory_not_own_words(lang: Lang) -> str:
    return (
        "这段内容来自转发或引用，我没有把它记作你的记忆。如果要记住，请用你自己的话告诉我。"
        if lang == "zh"
        else "That comes from forwarded or quoted content, so I have not saved it as your memory. "
        "Tell me in your own words if you want it remembered."
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
