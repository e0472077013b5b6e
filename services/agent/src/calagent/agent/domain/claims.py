"""Exit checks: does a free-text reply claim a fact that only a tool could have established?

The flag that decides is a fact (`schedule_write_persisted`, "a read tool ran"); these patterns only
find the claim in the text. They are deliberately broad: a false positive replaces a harmless reply
with an honest one, a false negative lets a fabricated receipt through.
"""

from __future__ import annotations

import re

_CREATE_CLAIMS = re.compile(
    # A claim reports a completed write: 已/已经 … 创建, or 帮你 … 好了/了/成功. An offer or a
    # capability ("有什么可以帮你安排的吗", "我可以帮你创建日程") is not a claim.
    r"(已|已经).{0,10}(创建|建好|添加|加入|安排|记录|预约|预定|设置|写入|加到|排上|放进|保存)"
    r"|(帮你|为你|给你)(创建|建|添加|加|安排|记|预约|预定|设置|写|排|放)(好|了|上|进|成功)"
    r"|(创建|添加|安排|预约|设置)(成功|好了|完成)"
    r"|日程.{0,6}(已|已经)"
    r"|\b(i|i've|i have|we've|we have)\s+(just\s+)?(created|scheduled|added|booked|put|set up|saved)\b"
    r"|\b(has|have) been (created|scheduled|added|booked|saved)\b"
    r"|\b(added|saved) (it )?to your calendar\b"
    r"|\bis (now )?(on|in) your calendar\b"
    r"|\ball set\b.{0,40}\b(calendar|meeting|event)",
    re.IGNORECASE,
)

_READ_CLAIMS = re.compile(
    r"(你|您).{0,12}(没有|没|有|还有).{0,10}(安排|日程|会议|事情|活动|约)"
    r"|(日程|安排|日历).{0,6}(是空的|为空|空闲|很空|满了|没有)"
    r"|(没有|无)(任何)?(安排|日程)"
    r"|\byou (have|'ve got|don't have|do not have|have no|'re free|are free)\b"
    r"|\byour (calendar|schedule|day|afternoon|morning|evening) (is|looks) (free|empty|clear|open|busy|packed)\b"
    r"|\bnothing (is )?(scheduled|planned|on your calendar)\b"
    r"|\bno (events|meetings|appointments)\b",
    re.IGNORECASE,
)


_SENTENCE = re.compile(r"[^。！？!?\n]+[。！？!?]?")
_QUESTION_END = re.compile(r"([？?]|[吗呢吧][。！!]?)\s*$")


def _statements(text: str) -> list[str]:
    """Sentences that state something; a question back to the user ("有什么可以帮你安排的吗？",
    "Do you have anything tomorrow?") asserts nothing about the calendar."""
    return [s for s in _SENTENCE.findall(text) if s.strip() and not _QUESTION_END.search(s.strip())]


def claims_creation(text: str) -> bool:
    return any(_CREATE_CLAIMS.search(sentence) for sentence in _statements(text))


def claims_schedule_read(text: str) -> bool:
    return any(_READ_CLAIMS.search(sentence) for sentence in _statements(text))
