"""The one table of numerals, for every reader of words: the time service's lexicon (clock times,
days, a proposed time a reply names) and the agent's reading of a pick among several things.
Chinese digits, English number words and ordinals, and a number written in any of them."""

from __future__ import annotations

ZH_DIGITS = {
    "零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3,
    "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9,
}  # fmt: skip
EN_NUMBERS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip
EN_ORDINALS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5,
    "sixth": 6, "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10,
    "1st": 1, "2nd": 2, "3rd": 3, "4th": 4, "5th": 5, "6th": 6, "7th": 7, "8th": 8, "9th": 9, "10th": 10,
}  # fmt: skip


def number(text: str) -> int | None:
    """Arabic or Chinese numerals up to 99 (十, 十二, 二十三, 两, 零五), or an English number word."""
    if text.isdigit():
        return int(text)
    if text in EN_NUMBERS:
        return EN_NUMBERS[text]
    if "十" in text:
        tens_text, _, ones_text = text.partition("十")
        if tens_text in ("", "一"):
            tens = 1
        elif len(tens_text) == 1 and tens_text in ZH_DIGITS and tens_text not in "零〇两":
            tens = ZH_DIGITS[tens_text]
        else:
            return None
        if ones_text == "":
            return tens * 10
        if len(ones_text) == 1 and ones_text in ZH_DIGITS and ones_text not in "零〇两":
            return tens * 10 + ZH_DIGITS[ones_text]
        return None
    if len(text) == 2 and text[0] in "零〇" and text[1] in ZH_DIGITS:
        return ZH_DIGITS[text[1]]
    if len(text) == 1 and text in ZH_DIGITS:
        return ZH_DIGITS[text]
    return None
