"""The demo script: what `calagent up` talks to when no real model is configured.

It knows a handful of sentences (the seed's three opening ones among them) in Chinese and English,
answers them with the tool calls a good model would make, and says plainly that it is a script for
everything else. Tool and argument names follow the public tool contract.
"""

from __future__ import annotations

from typing import Any, Final

from calagent.contracts.text import HAN_CLASS
from calagent.scriptedmodel.script import Script

__all__ = ["DEMO_SENTENCES", "demo_script", "demo_script_dict"]

# The sentences the demo understands, as (Chinese, English) pairs.
DEMO_SENTENCES: Final[tuple[tuple[str, str], ...]] = (
    ("明天下午三点和张三开会", "Tomorrow 3pm, meet Zhang San"),
    ("明天下午有什么安排", "What's on tomorrow afternoon"),
    ("昨天下午开了个会，好累", "Had a meeting yesterday afternoon, so tired"),
    ("这个周末去修汽车轮毂", "Fix the car wheel this weekend"),
    ("这个月有什么安排", "What's on this month"),
    ("请记住我咖啡不加糖", "Remember that I take my coffee without sugar"),
    ("你还记得我喝咖啡的习惯吗", "Do you remember how I take my coffee"),
    ("算了，不建了", "Never mind"),
)

_DEFAULT_TEXT = (
    "我是 calagent 内置的脚本演示模型，不是真正的大模型，只认识脚本里的几句话："
    + "、".join(f"「{zh}」" for zh, _ in DEMO_SENTENCES)
    + "。设置 OPENAI_BASE_URL 和 OPENAI_API_KEY 即可接入真实模型。\n"
    "I am calagent's built-in scripted demo model, not a real language model, and I only know the "
    "sentences in my script: "
    + "; ".join(f'"{en}"' for _, en in DEMO_SENTENCES)
    + ". Set OPENAI_BASE_URL and OPENAI_API_KEY to use a real model."
)


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def _user(regex: str) -> dict[str, Any]:
    return {"last_role": "user", "user_regex": regex}


# Long on purpose: it is data (the demo's rules in the order they are tried), not steps.
def demo_script_dict() -> dict[str, Any]:
    """The demo script as plain data, the same shape a YAML script file has."""
    rules: list[dict[str, Any]] = [
        # Only intermediate tools (search_memory, search_chat_archive) send their result back to the
        # model; answer in the language the user wrote in.
        {
            "name": "tool_result_zh",
            "when": {"last_role": "tool", "user_regex": HAN_CLASS},
            "respond": {"text": "（演示模型）{{tool}} 查到的内容：{{tool_result}}"},
        },
        {
            "name": "tool_result_en",
            "when": {"last_role": "tool"},
            "respond": {"text": "(demo model) {{tool}} found: {{tool_result}}"},
        },
        {
            "name": "cancel",
            "when": _user(r"(?i)^\s*(算了|不建了|不用建了|不要了|取消)|\bnever\s*mind\b|^\s*cancel\b"),
            "respond": _call("cancel_schedule_command"),
        },
        {
            "name": "save_memory",
            "when": _user(r"(?i)^\s*(请)?(帮我)?记住|^\s*(please\s+)?remember\b"),
            "respond": _call("save_memory", content="{{user}}"),
        },
        {
            "name": "search_memory",
            "when": _user(r"(?i)你还?记得|do you (still )?remember|what do you know about me"),
            "respond": _call("search_memory", query="{{user}}"),
        },
        {
            # A past-tense remark: it has a date and a meeting, and must touch nothing.
            "name": "past_remark_zh",
            "when": _user(r"^(?=.*昨天)(?=.*会)"),
            "respond": {"text": "辛苦了！开了一下午的会确实累人，今晚早点休息吧。我没有改动你的日程。"},
        },
        {
            "name": "past_remark_en",
            "when": _user(r"(?i)^(?=.*\byesterday\b)(?=.*\b(meeting|met)\b)"),
            "respond": {
                "text": "That sounds exhausting. Get some rest tonight. I haven't changed your calendar."
            },
        },
        {
            "name": "query_tomorrow_afternoon",
            "when": _user(
                r"(?i)^(?=.*明天下午)(?=.*(安排|日程|什么事|忙吗))"
                r"|^(?=.*\btomorrow afternoon\b)(?=.*\b(what|anything|busy|schedule)\b)"
            ),
            "respond": _call("query_schedule_range", start="D+1T12:00", end="D+1T18:00"),
        },
        {
            "name": "query_this_month",
            "when": _user(
                r"(?i)^(?=.*(这个月|本月))(?=.*(安排|日程))"
                r"|^(?=.*\bthis month\b)(?=.*\b(what|anything|schedule)\b)"
            ),
            "respond": _call("query_schedule_range", start="M+0", end="M+1"),
        },
        {
            "name": "create_meet_zhang_san_zh",
            "when": _user(r"^(?=.*明天)(?=.*下午\s*(三|3)\s*点)(?=.*张三)"),
            "respond": _call(
                "prepare_or_create_schedule", title="和张三开会", date="D+1", time="15:00", calendar="工作"
            ),
        },
        {
            "name": "create_meet_zhang_san_en",
            "when": _user(r"(?i)^(?=.*\btomorrow\b)(?=.*\b3\s*(pm|p\.m\.))(?=.*\bzhang\s*san\b)"),
            "respond": _call(
                "prepare_or_create_schedule",
                title="Meet Zhang San",
                date="D+1",
                time="15:00",
                calendar="工作",
            ),
        },
        {
            # A weekend has two days: the create comes back as needs_date, which is the point.
            "name": "create_wheel_zh",
            "when": _user(r"^(?=.*周末)(?=.*轮毂)"),
            "respond": _call("prepare_or_create_schedule", title="修汽车轮毂", date="WE"),
        },
        {
            "name": "create_wheel_en",
            "when": _user(r"(?i)^(?=.*\bweekend\b)(?=.*\bwheels?\b)"),
            "respond": _call("prepare_or_create_schedule", title="Fix the car wheel", date="WE"),
        },
    ]
    return {"rules": rules, "default": {"text": _DEFAULT_TEXT}}


def demo_script() -> Script:
    return Script.model_validate(demo_script_dict())
