"""Exit checks: does a free-text reply claim a fact that only a tool could have established?

The flag that decides is a fact (`schedule_write_persisted`, "a read tool ran"); this module only
finds the *claim* in the text. It does not enumerate receipts ("已创建", "日程添加成功", ...): the model
can always reword around a phrase list. It recognises the bounded grammatical shape of a claim.

A claim is an *assertion*: not a question, not an offer or capability, not a conditional, not a
wish or an echo of what the user said. It either says

* that the user's calendar was **changed** (``Claims.write``): a change verb (create, add, book,
  put, note, move, reschedule, cancel, delete, remove, ...) with a completion marker (了/已/好了/
  成功; a past participle after I/we, has been, is now; done, all set, it's on your calendar) and
  no negation or failure of the change; a header reporting operations as done ("已完成以下操作：",
  "Here's what I changed:") makes the list under it the changes; or
* what the calendar **contains**, or that it is empty or free (``Claims.read``): a second-person
  possession or existence over calendar nouns (你…有/没有…会; you have, there is … on your
  calendar, your next meeting is …), availability (空闲/有空/free/busy/wide open), an event or an
  arrangement at a time (婚礼是周日; 约的是11月20号), the calendar cited as evidence (日历上写着,
  per your calendar), what a day holds or what is left after a change (Thursday now just has …,
  only … remains, 那天就这一件事), or an enumerated list of times and titles.

The text is split into sentences and clauses; each clause gets a mood from small tables of markers,
and only assertive clauses are searched for the verb, completion, object and read classes. Each table
below is a closed lexical class with a comment saying why it exists; code, not one regex, combines
them. `find_claims` is pure and fast (it runs on every streamed prefix of a reply).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["Claims", "claims_creation", "claims_schedule_read", "find_claims"]


@dataclass(frozen=True)
class Claims:
    write: bool = False  # asserts the user's calendar was changed
    read: bool = False  # asserts the calendar's contents or emptiness/availability

    @property
    def any(self) -> bool:
        return self.write or self.read


NONE = Claims()

_Trie = dict[str, "_Trie"]


def _alt(words: Iterable[str]) -> str:
    """A regex matching any of `words`, the longest one at a position (Python's `|` takes the first
    alternative, not the longest). Built as a prefix trie so the regex engine tests one character
    per branch instead of every word in turn: these tables run on every streamed prefix."""
    trie: _Trie = {}
    for word in set(words):
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: _Trie) -> str:
        ends = "" in node
        branches = [re.escape(ch) + build(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if ends:
            body = "(?:" + body + ")?"
        return body

    return build(trie)


# ──────────────────────────────────────────────────────────────────────────────────────────────
# Splitting. A claim lives in one clause; a question mark or an "if" in a neighbouring clause must
# not hide it ("已经帮你取消了，还需要别的吗？").
# ──────────────────────────────────────────────────────────────────────────────────────────────

# Sentence ends: CJK and ASCII terminal punctuation, newlines, ellipses, and an English full stop
# followed by space/end unless it closes a one-letter abbreviation (a.m., p.m., e.g.).
_SENTENCE_END = re.compile(r"[。！？!?；;\n….]+")
_ABBREVIATION = re.compile(r"(?:^|[\s.])[a-z]$")  # the "m" of "p.m." or the "g" of "e.g."

# ──────────────────────────────────────────────────────────────────────────────────────────────
# Chinese classes
# ──────────────────────────────────────────────────────────────────────────────────────────────

# Change verbs that name a calendar change on their own: with a completion marker they are a
# write claim even when the object is elided ("好的，已取消。").
_ZH_STRONG_VERBS = (
    "创建", "新建", "新增", "建好", "添加", "添上", "加上", "加到", "加进", "加入到", "录入", "预约", "预订", "预定", "订好", "订上",
    "约好", "约上", "改期", "改到", "改成", "改为", "改在", "改至", "挪", "移到", "移至", "移动到", "调到", "调至", "调整到", "调整为",
    "调成", "推迟", "延后", "延期", "推后", "顺延", "往后推", "推到", "提前到", "取消", "删除", "删掉", "删去", "删", "移除", "移走",
    "清空", "清除", "清掉", "去掉", "撤销", "撤掉", "撤下", "划掉", "排上", "排进", "排好", "安排上", "安排好", "安排进", "设好", "定好",
    "换到", "登记", "标记为", "推掉", "重新安排",
)  # fmt: skip

# Change verbs that also have everyday senses (改 a sentence, 设 a goal, 弄/办 anything, 记下 a remark,
# 放在心上): they are a write claim only with a calendar object or a time nearby, a beneficiary
# (帮你/给你), 它, or an elided object ("好的，记下了").
_ZH_WEAK_VERBS = (
    "建", "建立", "加", "记", "记录", "录", "安排", "排", "约", "订", "定", "设置", "设定", "设", "放", "写", "保存", "存",
    "标记", "标注", "改", "修改", "更改", "改动", "更新", "调整", "调", "移", "移动", "提前", "空出", "腾出", "留出", "预留", "锁定",
    "弄", "办", "搞", "处理", "同步", "换", "换成", "延长", "缩短", "撤", "清", "拿掉", "去除", "关掉", "关闭", "开启", "打开",
    "屏蔽", "占用", "附上", "附在", "跳过", "记下", "记上", "记好", "记到", "记在", "记进", "写入", "写进", "写上", "放进", "放到", "放在",
    "放入", "存入", "存到", "保存到", "保存在", "加在",
    # corrections and swaps of an entry ("时间已更正为三点", "两个会对调了")
    "修正", "更正", "修复", "修好", "调换", "对调", "互换",
    # holding a slot: a time taken on the calendar ("在日程上占好位置了", "那段时间占上了", "时间留好了")
    "占", "占好", "占上", "占住", "占下", "留好", "留住", "圈出", "圈好", "圈上",
)  # fmt: skip

# Words that contain a change verb's characters but are not a change ("参加" ≠ 加, "建议" ≠ 建,
# "改天" ≠ 改, "获取消息" ≠ 取消, "记住" is memory, not the calendar). Matched first and skipped.
_ZH_NOT_VERBS = (
    "参加", "加油", "加班", "更加", "增加", "加快", "加强", "加深", "加热", "附加", "追加说明",
    "改天", "改善", "改进", "改正", "改革", "改变主意", "记得", "日记", "笔记", "忘记", "记忆",
    "记住", "记性", "获取", "读取", "提取", "领取", "争取", "采取", "吸取", "听取", "选取",
    "建议", "建筑", "建设", "设计", "设备", "假设", "设想", "设施", "放心", "放松", "放假", "放弃",
    "开放", "释放", "播放", "放学", "排队", "排除", "排名", "排查", "移民", "调查", "调研", "空调",
    "强调", "调皮", "单调", "低调", "约会", "大约", "约定", "约束", "节约", "一定", "确定", "决定",
    "肯定", "固定", "稳定", "特定", "指定", "定期", "规定", "存在", "写作", "办法", "办公", "搞笑",
    "弄错", "搞错", "弄混", "搞混", "弄丢", "换句话", "换个角度", "交换", "提前准备", "清楚",
    "清晰", "清淡", "安排好时间", "处理器", "同步进行", "撤退", "记者", "登记处", "定位",
    "占上风", "占据", "占比", "占线", "占卜", "霸占", "留住客户",
)  # fmt: skip

_ZH_VERB_RE = re.compile(_alt(_ZH_NOT_VERBS + _ZH_STRONG_VERBS + _ZH_WEAK_VERBS))
_ZH_STRONG = frozenset(_ZH_STRONG_VERBS)
_ZH_WEAK = frozenset(_ZH_WEAK_VERBS)

# Completion before the verb: 已/已经 (also 已被/都已/均已), anywhere earlier in the clause
# ("已把“产品发布会”从下午2点调整到下午3点").
_ZH_ALREADY = re.compile(r"已")

# Completion after the verb: a perfective particle (了/啦/咯/喽) or a resultative of success. The
# search stops at words that turn what follows into a condition, a modal or a degree comment
# ("删了就找不回来了", "改期太麻烦了", "取消之后无法恢复了"), and at 时/的时候, which make the verb
# the time of something else ("修改日程时出了问题": while changing it, not a change made; 小时/按时/
# 同时/3时 are other words).
_ZH_AFTER_STOP = re.compile(
    r"就|才|再|吗|呢|吧|的话|太|真|挺|得|要|能|可以|如果|还是|或者|无法|没法|不能|"
    r"(?<![开例站晨周早晚组个场次的班])会(?!议)|"
    r"(?<![\d０-９一二三四五六七八九十两小按准及临定同暂当届平随])时(?![间长段区])"
)
_ZH_PERFECTIVE = re.compile(r"了(?!解|不起|就|之后|以后|后|再)|啦|咯|喽|成功|完成|完毕|搞定|妥当|妥了")
# A change that did not happen: failure after the verb (取消失败, 删不了).
# An error while the change ran is a failure too ("创建日程的时候出错了", "保存时报错").
_ZH_FAILED = re.compile(
    r"失败|不了|不成|没有?成功|未能?成功|没能成功|不成功|没有?生效|未生效|不到|出错|出了错|报错|出(?:了|现)?(?:点)?问题|异常|故障"
)
# Negation before the verb (没/未/还没/不/无法/没能...), minus set phrases that only look negative.
_ZH_NEG = re.compile(
    r"(没问题|没关系|没事|不好意思|不客气|不错|不少|不用谢|不用担心|别担心|不然)"
    r"|(没有|没|未|尚未|并未|不|别|无法|不能|没能|未能|不用|不必|无需|暂未|还没|并没|无)"
)
# Modal, future or offer before the verb: the change is proposed, not done (我可以/要我/我会/我来).
_ZH_MODAL_BEFORE = re.compile(
    r"可以|能够|我能|我来|我去|让我|要我|需要我|我会(?!议)|会帮|将会(?!议)|我将|我要|打算|准备|想要|想|"
    r"需要|应该|得先|请|麻烦|记得|随时|再帮|马上帮|这就|稍后|待会|一会儿|等会"
)
# Words that make a clause a request back to the user, a question or a suggestion.
# (着呢 is an emphatic statement, not a question: "日历上写着呢")
_ZH_QUESTION_END = re.compile(r"(?:吗|(?<!着)呢|么|吧|嘛|不)[~～…。.!！\s]*$")
_ZH_QUESTION_ANYWHERE = re.compile(
    r"有没有|是不是|是否|要不要|需不需要|能不能|可不可以|会不会|行不行|好不好|对不对|能否|可否|"
    r"几个(?<!好几个)|几场|几件|多少(?<!没多少)|什么(?<!没什么)(?<!没有什么)(?![^，。？?]{0,4}?[都也])|哪(?!怕|天都|里都|个都)|几点|几号|几时|多久|多长|怎么|为什么|为何|谁|请问|还是"
)
# Sentence openers that make the whole sentence a question, offer or request.
_ZH_QUESTION_OPEN = re.compile(
    r"^(?:要不要|需不需要|是否|请问|你确定|您确定|确定要|你是想|您是想|想不想|能不能|可不可以|要不)"
)
# Tag questions: the clause before them is put to the user, not asserted ("改到周五，对吗？").
# Only tags that question the truth of the clause ("对吗"); acceptance tags ("可以吗", "行吗") leave
# a reported change a claim ("已经帮你挪到周五了，可以吗？").
_ZH_TAG = re.compile(r"^(?:对吗|对吧|是吗|是吧|没错吧|对不对|是不是|对么)[？?]?$")
# Conditionals: the protasis and, when it opens the clause, the clause after it.
_ZH_COND = re.compile(
    _alt(
        (
            "如果",
            "要是",
            "假如",
            "假设",
            "若是",
            "倘若",
            "一旦",
            "万一",
            "只要",
            "等你",
            "等您",
            "等我",
            "的话",
            "的时候",
            "确认后",
            "之后再",
            "以后再",
        )
    )
)
_ZH_COND_TAIL = re.compile(r"(?:的话|的时候|之后|以后|后)$")
# Empathy, wishes, echoes of the user and uncertainty: nothing is asserted about the calendar.
_ZH_NON_ASSERT = re.compile(
    r"听起来|听说|谢谢|感谢|多谢|你说(?!的)|你提到(?!的)|您说(?!的)|您提到(?!的)|祝|希望|可惜|遗憾|辛苦|不知道|不确定|不清楚|无法确认|"
    r"没法确认|无法告诉|没法告诉|不能告诉|无法确定|没法说|说不准|看不到|查不到|无法访问|无法查看|没法查|还没查|没有查|没查|查一下|查查|看看|比如|例如|"
    r"你可以说|可以说"
)

# A changed state without a change verb: "已经在日程里了", "现在这个会在周四下午了".
_ZH_STATE_CHANGE = re.compile(
    r"在(?:你的?|您的?)?(?:日历|日程|行程)[里上中]?了|现在[^，。]{0,12}?(?:在|是|为|改)[^，。]{0,12}?了"
)
# Headers of capability lists and examples: what follows them describes, it does not assert.
_ZH_HEADER = re.compile(
    r"功能|我能做|我可以做|我能帮|比如|例如|譬如|示例|例子|小贴士|你可以说|可以这样说|可以对我说"
)
# A search verb before 空闲/空档 makes them an object ("查询空闲时间"), not a statement.
_ZH_SEARCH_VERB = re.compile(r"查询|查找|寻找|找|搜索|推荐|查看|看")

# Calendar nouns: what a change or a contents claim is about. "会" alone is a modal verb, so only a
# counted or modified 会 ("三个会", "站会", "的会") counts.
_ZH_CAL_NOUN = re.compile(
    r"日历|日程|行程|会议|[个场次例站晨周早晚组班]会|的会(?![议员计儿])|客户会|评审会|复盘会|"
    r"安排|提醒|事件|活动|预约|聚餐|聚会|饭局|面试|课|航班|体检|约会|计划|待办|事项|出差|培训|"
    r"电话会|午饭|晚饭|早饭|午餐|晚餐|牙医|理发|健身|跑步|瑜伽|会面|见面|"
    # appointments and occasions (约见 and 拜访 are meetings; 备注 is a field of an entry)
    r"约见|碰面|面谈|会谈|拜访|婚礼|典礼|派对|考试|比赛|演出|讲座|复查|门诊|备注"
)
# Time expressions: dates, weekdays, parts of day and clock times.
_ZH_TIME = re.compile(
    r"今天|明天|后天|大后天|今晚|明早|明晚|今早|早上|上午|中午|下午|傍晚|晚上|凌晨|全天|整天|"
    r"周[一二三四五六日天末]|星期[一二三四五六日天]|礼拜[一二三四五六日天]|下周|这周|本周|下个月|"
    r"这个月|本月|上个月|月初|月底|那天|当天|这天|那一天|当晚|"
    # the rest of a day after what it holds ("那天就这一件事，其余时间都空")
    r"(?:其余|其他|剩下的?|另外的?)(?:时间|时段)|"
    r"[0-9０-９一二三四五六七八九十两]+点|\d{1,2}[:：]\d{2}|\d+月\d+[日号]|\d+[日号]"
)
_ZH_CLOCK = re.compile(
    r"[0-9一二三四五六七八九十两]+点(?:半|[0-9一二三四五六七八九十]+分?)?|\d{1,2}[:：]\d{2}"
)
# The beneficiary or a pronoun object: the agent acted for the user ("帮你记上了", "把它删了").
_ZH_FOR_YOU = re.compile(r"[帮给为替](?:您|你)|它|[「“『\"]")
# Who acts: 我 (the agent), 你/您 (the user, as subject, not 你的 or 帮你). A 你 that opens a short
# relative clause ending in 的 ("你要的备注", "你回成都的航班", "你上午的会") modifies the noun after
# it: that noun is the subject ("你要的备注加上了" reports a change, not the user's own doing).
_ZH_PRONOUN = re.compile(r"我们|我|(?<![帮给为替跟和陪让找请诉])(?:你|您)(?![的和跟与]|[^，。、的\s]{1,4}的)")

# Read classes.
# Possession/existence: 你…有/没有…<calendar noun> and <time>…有/没有…<calendar noun>.
# A total needs no 有: "明天一共三个会" (一共/总共/合计 state a count of what is there).
_ZH_HAVE_WORDS = (
    "还有", "只有", "也有", "都有", "共有", "一共有", "各有", "有", "没有", "没", "只剩", "剩下", "还剩", "就剩",
)  # fmt: skip
_ZH_HAVE = re.compile(_alt(_ZH_HAVE_WORDS) + "|" + _alt(("一共", "总共", "共计", "合计", "总计")))
# A count of events ("三个会", "2场面试", "那一个"): after a have-word anywhere in its tail, and right
# after a time as a nominal predicate ("周五两个会").
_ZH_COUNT = re.compile(r"[一二三四五六七八九十两几\d]+(?:个|场|项|件|节)")
_ZH_COUNT_AFTER_TIME = re.compile(
    r"(?:的)?(?:" + _alt(("一共", "总共", "共", "还", "只", "就", "又", "都", "共计", "合计")) + r")?"
    r"[这那]?[一二三四五六七八九十两几\d]+(?:个|场|项|件|节)"
)
# An event said to be at a day or time: "面试是在周三", "体检在下周一上午". Only a real event noun
# (not 安排/计划, which are also verbs: "计划在周四完成"), directly followed by 在/是在/是 and a time.
_ZH_EVENT_AT = re.compile(
    r"(?:[个场次例站晨周早晚组班的]会(?![议员计儿])|会议|评审会|复盘会|客户会|电话会|面试|课|航班|体检|约会|聚餐|聚会|饭局|"
    r"会面|见面|活动|预约|提醒|牙医|培训|出差|午餐|晚餐|午饭|晚饭|"
    r"约见|碰面|面谈|会谈|拜访|婚礼|典礼|派对|考试|比赛|演出|讲座|复查|门诊)[」”』\"]?"
    r"(?:确实|其实|实际上|就|还|也|都|仍然|依然|照常|一直)?(?:是在|在|是)"
)
# The time an arrangement was made for: "你和赵律师约的是11月20号", "机票订的是周五早上".
_ZH_ARRANGED_AT = re.compile(
    r"(?:预约|预订|预定|约好|定好|订好|安排|(?<![确决肯规指固稳特一])定|约|订|排)的(?:时间)?(?:是在|是|在|为)"
)
_ZH_TIME_IS_EVENT = re.compile(r"是[^，。]{0,10}?(?:" + _ZH_CAL_NOUN.pattern + ")")
# An evaluation makes "会议在周四比较合适" a suggestion, not the calendar's contents.
_ZH_EVALUATIVE = re.compile(r"合适|更好|最好|比较好|方便|理想|建议|推荐|可以|可能|应该")
# Availability and emptiness, asserted of the user or a time.
_ZH_AVAIL_WORDS = (
    "有空", "没空", "空闲", "空着", "是空的", "空的", "很空", "全空", "空白", "没事", "没什么事", "没有事",
    "有事", "排满", "满了", "很满", "挺满", "满满", "安排满", "冲突", "撞了", "重叠", "没有安排", "没安排",
    "无安排", "没有任何安排", "没什么安排", "什么安排都没有", "没有会", "没会", "没有日程", "没有行程",
    "空档", "空当", "有时间", "没时间", "闲", "忙",
    # nothing besides what was named ("那天除了这个就没别的了")
    "没别的", "没有别的", "没其他", "没有其他", "别的都没有", "其他都没有",
)  # fmt: skip
_ZH_AVAIL = re.compile(
    _alt(_ZH_AVAIL_WORDS)
    + "|(?:一个|一场|一件|任何|什么)[^，。]{0,4}?[都也]没有?"  # "一个会都没有"
    # "安排比较满"; 轻松/宽松/紧凑/密集 say how loaded a day is, like light/heavy (紧张 is a mood)
    # a superlative compares days of the calendar ("周二是最轻松的一天"); 都/也 spread emptiness
    # over the rest ("其余时间都空")
    + "|(?:很|挺|比较|太|非常|特别|有点|相当|超|蛮|还算|最)(?:满|空|忙|闲|轻松|宽松|紧凑|密集)|[都也]空"
)
# After 没有/没: a change that did not happen ("日程没有变化", and any change verb: "没有保存成功"),
# not emptiness. `_zh_no_change` adds the verb tables.
_ZH_NO_CHANGE = re.compile(r"(?:任何)?(?:变化|变动|改动|更改|修改|调整|动过|动|被|成功|改|删|加)")
# The calendar itself as subject ("日历上显示…", "日程是空的") and a listing header ("安排如下").
# The calendar as evidence ("航班在日历上是12号的", "日历上写着呢", "根据你的日历，…") states what it
# holds too.
_ZH_SURFACE = re.compile(
    r"(?:根据|按照|依据)(?:你|您)?的?(?:日历|日程|行程)|从(?:你|您)?的?(?:日历|日程|行程)(?:上|里|中)?来?看|"
    r"(?:日历|日程|行程)(?:表)?(?:上|里|中)(?:是(?!不是|否|可以|能)|写着|写的是|记着|记的是|标着|标的是|写明)|"
    r"(?:日历|日程|行程|安排)(?:表)?(?:上|里|中)?(?:显示|是空的|为空|空空|很空|很满|挺满|满了|已满|排满|"
    r"一共有|共有|只有|还有|有|没有)|如下|(?:以下|下面|这)是(?:你|您)|(?:你|您)的(?:[^，。]{0,8}?)"
    r"(?:日程|安排|行程|日历|会议|会|下一个|第一个|最后一个|提醒)[^，。我]{0,4}?(?:是|在|为|如下|很|挺|比较|太|都|显示|还有|只有|从|：|:)|"
    r"(?:下一个|下个|第一个|最早的|最近的|最近一个|接下来的|最后一个)(?:一个|个)?(?:会议|会|安排|日程|提醒|行程)?[^，。]{0,3}?(?:是|在)"
)


# ──────────────────────────────────────────────────────────────────────────────────────────────
# English classes (the text is lower-cased and ’ is folded to ').
# ──────────────────────────────────────────────────────────────────────────────────────────────

# Change verbs in the past tense / participle, the only forms that report a done change. Strong
# ones name a calendar change on their own; weak ones ("set", "made", "noted", "changed") need a
# calendar object, a time or "it" in the sentence.
_EN_STRONG_FORMS = (
    "created", "added", "booked", "scheduled", "rescheduled", "postponed", "cancelled", "canceled",
    "deleted", "removed", "penciled", "pencilled", "rebooked", "called off", "moved", "pushed back",
    "brought forward", "moved up", "calendared", "put in", "put down", "blocked off", "blocked out",
)  # fmt: skip
_EN_WEAK_FORMS = (
    "put", "noted", "recorded", "saved", "set", "set up", "changed", "shifted", "pushed", "cleared",
    "updated", "marked", "logged", "entered", "blocked", "reserved", "arranged", "made", "taken",
    "took", "inserted", "wrote", "written", "jotted", "slotted", "fitted", "squeezed", "locked",
    "confirmed", "accepted", "declined", "dropped", "bumped", "swapped", "switched", "adjusted",
    "extended", "shortened", "edited", "renamed", "erased", "wiped", "scrapped", "planned",
    "organized", "organised", "delayed", "brought", "handled", "sorted", "replaced", "merged", "skipped",
    # Corrections: a wrong entry made right is a change too ("I corrected the dentist to 3").
    "fixed", "corrected", "amended", "tweaked", "rearranged", "reordered", "restored", "reinstated",
    "unblocked", "freed", "retitled",
    # A series or a run of entries brought to an end or put on hold ("the series has been ended").
    "ended", "stopped", "discontinued", "terminated", "paused", "resumed", "cut short", "cut",
)  # fmt: skip
_EN_FORMS = _alt(_EN_STRONG_FORMS + _EN_WEAK_FORMS)
# Forms that also say an event ran its course by itself ("the call ended at 3", "we ended up …"): a
# change only with an agent or a passive, never as a headline or before "up".
_EN_ALSO_INTRANSITIVE = frozenset({"ended", "stopped", "paused", "resumed"})
_EN_STRONG = frozenset(_EN_STRONG_FORMS)
# Forms that are also the base form (imperative): "Put it in your calendar" is advice, not a receipt.
_EN_BASE_EQUALS_PAST = frozenset({"put", "set", "set up", "cut", "cut short"})
# Adverbs that may sit between the auxiliary and the participle.
_EN_ADV = r"(?:just|already|also|now|successfully|officially|gone ahead and|went ahead and|quickly|finally|then|both|all|automatically|tentatively|since|actually|simply|been)"
# Write claims with the agent as subject (I've moved / we cancelled / I went ahead and booked).
_EN_AGENT_DID = re.compile(rf"\b(?:i|we)(?:'ve| have| had)?(?:\s+{_EN_ADV})*\s+(?P<v>{_EN_FORMS})\b")
# The user as subject of a past change states what their calendar holds (you've scheduled three...).
_EN_USER_DID = re.compile(rf"\byou(?:'ve| have)(?:\s+{_EN_ADV})*\s+(?P<v>{_EN_FORMS})\b")
# "I managed to book / we were able to move": a completed change in the infinitive.
_EN_BASE_VERBS = (
    "create", "add", "book", "schedule", "reschedule", "postpone", "cancel", "delete", "remove",
    "move", "put", "set up", "block off", "block out", "pencil in", "clear", "rebook", "shift",
    "push", "change", "update", "save", "note", "squeeze", "fit", "slot", "fix", "correct", "swap",
)  # fmt: skip
_EN_MANAGED = re.compile(
    rf"\b(?:i|we)(?:'ve| have)?\s+(?:just\s+|finally\s+|also\s+)?(?:managed|was able|were able|got)\s+to\s+(?:{_alt(_EN_BASE_VERBS)})\b"
)
# Perfect passive: has been / have been / 's been + participle.
_EN_PERF_PASSIVE = re.compile(
    rf"\b(?:has|have|had|'s|'ve)\s+(?:{_EN_ADV}\s+)*been\s+(?:{_EN_ADV}\s+)*(?P<v>{_EN_FORMS})\b"
)
# Copula passive: is/are/was/were/got + participle ("is now scheduled", "was moved", "got cancelled").
_EN_PASSIVE = re.compile(
    rf"\b(?P<cop>is|are|was|were|'s|'re|got|gets|get)\s+(?P<adv>(?:{_EN_ADV}\s+)*)(?P<v>{_EN_FORMS})\b"
    r"(?!\s+(?:solid|up)\b)"
)
# Elliptical receipt at clause start: "Added to your calendar.", "Cancelled your 5pm.", "Booked!".
_EN_INTERJ = r"(?:ok|okay|sure|great|alright|all right|perfect|done|and|also|just|successfully|yes|yep|cool|right|sure thing|got it|no problem|all)"
_EN_ELLIPTIC = re.compile(
    rf"^(?:{_EN_INTERJ}\s+)*(?P<v>{_EN_FORMS})"
    r"(?=[\W_]*$|\s*[!.:\"“«]|\s+[\"“«]|\s+(?:it|them|that|this|your|you|the|to|for|from|on|in|into|off|and|both|all|a|an|everything|as|successfully|back|forward|up)\b)"
)
# Headline receipt: "<event> moved to Saturday", "Reminder set for 7am", "Meeting cancelled."
_EN_HEADLINE = re.compile(
    rf"^(?P<np>(?:[\w'&:-]+\s+){{1,8}}?)(?:{_EN_ADV}\s+)*(?P<v>{_EN_FORMS})"
    r"(?=[\W_]*$|\s*[!.]|\s+(?:to|for|from|on|at|until|till|and|successfully|as|off|back|forward|up|in)\b)"
)
# Generic completions: done / all set / consider it done / taken care of / it's on your calendar.
# Generic completions: done / all set / consider it done / taken care of / it's on your calendar.
# Each part runs only when its anchor word is among the clause's tokens.
_EN_DONE_PARTS: tuple[tuple[frozenset[str], re.Pattern[str]], ...] = (
    (
        frozenset({"done"}),
        re.compile(
            r"^(?:(?:ok|okay|sure|great|alright|perfect|and|all|yes|yep)\s+)*done\b(?!\s+(?:with|by|yet|for|so))"
            r"|\b(?:it's|it is|that's|that is|consider it|everything's|everything is|all)\s+(?:all\s+)?done\b"
        ),
    ),
    # "all set" and its synonym "all sorted".
    (frozenset({"set", "sorted"}), re.compile(r"\ball (?:set|sorted)\b")),
    (
        frozenset({"booked", "confirmed", "registered", "signed"}),
        re.compile(
            r"\byou(?:'re| are)\s+(?:all\s+)?(?:booked|confirmed|registered|signed up)\s+(?:in|for|at|on)\b"
        ),
    ),
    (frozenset({"care"}), re.compile(r"\b(?:taken|took)\s+care\s+of\b")),
    (
        frozenset({"got", "put"}),
        re.compile(
            r"\b(?:got|put)\s+(?:you|it|that|this|them)\s+(?:down|in)\b|\bgot\s+(?:it|that|this|them)\s+(?:on|in|into)\s+your\b"
        ),
    ),
    (
        frozenset({"calendar", "schedule", "agenda", "diary"}),
        re.compile(
            r"\b(?:it|that|this|they|those|both|everything)(?:'s| is|'re| are)\s+(?:now\s+|all\s+|already\s+)*"
            r"(?:on|in)\s+(?:your|the)\s+(?:calendar|schedule|agenda|diary)\b"
            r"|\b(?:is|are|'s|'re)\s+now\s+(?:on|in)\s+(?:your|the)\s+(?:calendar|schedule|agenda|diary)\b"
        ),
    ),
    (frozenset({"gone"}), re.compile(r"\b(?:is|are|'s)\s+gone\s+from\s+your\b")),
    # A whole clause that is only a pronoun, a copula and "in" is a receipt ("Yep, it's in."). The
    # anchors on both ends keep out places and topics ("it's in Berlin", "which room it's in").
    (
        frozenset({"in"}),
        re.compile(
            r"^(?:(?:ok|okay|great|perfect|done|and|yep|yes|alright|cool|sure)\s+)*"
            r"(?:that|it|you|they|both)(?:'s|'re| is| are)\s+(?:all\s+|now\s+|officially\s+)*(?:locked\s+)?in$"
        ),
    ),
    (
        frozenset({"now"}),
        re.compile(
            r"\b(?:is|are|'s|'re)\s+now\s+(?:at|on|from|in)\b"
            r"|\bnow\s+(?:runs|starts|begins|ends|falls|takes place|happens|lasts|repeats|recurs|occurs|sits|goes|"
            r"shows|reads|says|lists)\b"
        ),
    ),
)
# Negation before a match in the clause; "no problem" and friends only look negative.
_EN_NEG = re.compile(
    r"\b(?:no problem|no worries|not a problem|no sweat|no trouble)\b"
    r"|(?P<neg>\b(?:not|never|no|nothing|none|neither|nor|without|unable|failed|fail|cannot)\b|n't\b)"
)
# A modal directly before the auxiliary: "would have been cancelled", "could've moved".
_EN_MODAL_TAIL = re.compile(
    r"\b(?:would|could|should|might|may|must|will|'ll|can|shall|'d|to)(?:\s+not)?\s+(?:have\s+|'ve\s+|be\s+)?$|(?:would|could|should|might|must)'ve\s+$"
)
# Offers, capability, future, requests: changes after these are proposed, not reported.
_EN_MODAL_BEFORE = re.compile(
    # ("I can see / tell you have…" infers from the calendar; "I can tell you how many…" offers)
    r"\b(?:i|we)(?:'ll| will| can| could| would|'d| might| may| shall| should)\b"
    r"(?!\s+(?:see|tell)\b(?!\s+you\s+(?:how|what|when|where|which|who|whether|if|about|more)\b))"
    r"|\b(?:i|we)(?:'m| am| are|'re)\s+(?:going to|about to|happy to|glad to|able to|ready to|going|planning|trying)\b"
    r"|\blet me\b|\blet's\b|\bwant me to\b|\bhappy to\b|\bglad to\b|\bfeel free\b|\byou (?:can|could|may|might|should|'ll|will)\b"
    r"|\bplease\b|\bneed to\b|\bhave to\b|\bin order to\b|\bto (?:be )?(?:{v})\b|\bjust (?:say|tell|ask|let)\b"
)
# Whole-clause questions, opened by an auxiliary or a wh-word (also sensible on a prefix without "?").
_EN_QUESTION_OPEN = re.compile(
    r"^(?:(?:so|and|also|ok|okay|sure|great|alright|then|just|quick question)\s+)*"
    r"(?:do|does|did|would|could|can|should|shall|will|is|are|was|were|have|has|may|might|am|"
    r"what|which|when|where|who|whom|why|how|whose|want|wanna|any|anything|how about|what about|"
    r"just to confirm|to confirm|confirm|is it|are you|did you|would you|do you)\b(?!\s+(?:now|all)\b)"
)
_EN_TAG = re.compile(
    r"^(?:right|correct|is that right|is that correct|isn't it|aren't you|don't you|didn't i|did i|or not|yes or no)\??$"
)
# Conditionals (protasis): "if", "once you", "when you", "unless", "as soon as", "in case".
_EN_COND_WORDS = (
    "if", "unless", "once", "whenever", "as soon as", "in case", "provided", "assuming", "until", "till",
    "before", "after you", "when you", "when it's", "when i", "whether",
)  # fmt: skip
_EN_COND = re.compile(rf"\b(?:{_alt(_EN_COND_WORDS)})\b")
# Imperatives (advice to the user) open with a bare verb: "Batch your meetings so you have ...".
_EN_IMPERATIVE_VERBS = (
    "batch", "try", "consider", "make", "keep", "block", "put", "add", "move", "schedule", "book",
    "cancel", "set", "leave", "take", "give", "plan", "group", "spread", "avoid", "remember", "tell",
    "check", "use", "think", "go", "pick", "choose", "create", "reschedule", "delete", "remove",
    "clear", "write", "call", "ask", "send", "open", "look", "protect", "reserve", "combine", "space",
    "limit", "shorten", "start", "stop", "turn", "enable", "share", "invite", "decline", "accept",
    "skip", "drop", "push", "bring", "grab", "get", "rest", "relax", "double-check", "confirm",
    "review", "prepare", "aim", "stick", "treat", "mark", "note", "jot", "pencil", "hold", "save",
)  # fmt: skip
_EN_IMPERATIVE = re.compile(
    rf"^(?:(?:just|please|maybe|perhaps|also|and|so|then|simply|always|never|don't|do|instead|first)\s+)*"
    rf"(?:{_alt(_EN_IMPERATIVE_VERBS)})\b(?!\s+for\b|\s+it\s+done\b)"
)
# Headers of capability lists, tips and examples: what follows them describes, it does not assert.
_EN_HEADER_WORDS = (
    "things i can", "i can help with", "i can help you with", "features", "for example", "for instance",
    "e.g", "such as", "tip", "tips", "suggestion", "suggestions", "example", "examples", "try saying",
    "you can say", "you could say", "ideas", "here's how", "how to",
)  # fmt: skip
_EN_HEADER = re.compile(rf"\b(?:{_alt(_EN_HEADER_WORDS)})\b")
# Empathy, wishes, echoes of the user, hedges and not-knowing.
_EN_NON_ASSERT_WORDS = (
    "sorry to hear", "sorry that", "sorry your", "sorry about", "sounds like", "sounded like",
    "sounds tiring", "hope", "hoping", "wish", "good luck", "enjoy", "don't know", "do not know",
    "not sure", "can't tell", "cannot tell", "can't see", "cannot see", "don't have access",
    "no access", "unable to see", "unable to access", "can't access", "cannot access",
    "haven't checked", "without checking", "for example", "e.g", "such as", "try saying",
    "you could say", "you can say", "like saying", "imagine", "suppose", "pretend", "what a pity",
    "that's a shame", "what a shame", "must have been", "must be", "thanks for", "thank you for",
    "letting me know", "for the heads up", "have a great", "have a good", "have a nice",
    "have a wonderful", "have a lovely", "have a fun", "have a productive", "have a safe",
    # gladness about the user's own past ("glad you had a good call") is empathy, not a lookup
    "glad you", "glad that", "glad to hear", "happy to hear", "nice that you", "great that you",
)  # fmt: skip
_EN_NON_ASSERT = re.compile(
    rf"\b(?:{_alt(_EN_NON_ASSERT_WORDS)})\b|^(?:(?:so|and|as|ok|okay|oh)\s+)?you (?:said|mentioned|told me|noted)\b"
)

_EN_NOUN_WORDS = (
    "calendar", "schedule", "agenda", "diary", "meeting", "meetings", "appointment", "appointments",
    "event", "events", "reminder", "reminders", "call", "calls", "sync", "syncs", "standup",
    "stand-up", "standups", "1:1", "1-on-1", "one-on-one", "session", "sessions", "slot", "slots",
    "booking", "bookings", "reservation", "invite", "invites", "invitation", "entry", "entries",
    "hold", "lunch", "dinner", "breakfast", "brunch", "coffee", "interview", "interviews", "class",
    "classes", "lesson", "review", "retro", "demo", "conference", "offsite", "workshop", "flight",
    "flights", "trip", "gym", "yoga", "haircut", "dentist", "doctor", "doctor's", "checkup", "party",
    "plans", "commitments", "conflict", "conflicts", "overlap", "deadline", "birthday", "check-in",
    "appointment's", "physio", "vet", "date", "visit", "concert", "movie", "training", "webinar",
    "all-hands", "huddle", "catch-up", "catchup", "planning", "presentation", "hotel", "flight",
    "change", "changes", "edit", "edits", "update", "updates",
    # appointments and occasions
    "exam", "exams", "wedding", "ceremony", "recital", "rehearsal", "lecture", "seminar", "meetup",
    "surgery", "procedure", "massage", "therapy", "shift", "shifts", "appt", "graduation", "funeral",
    "consultation", "follow-up", "followup", "playdate", "pickup",
)  # fmt: skip
_EN_NOUNS = _alt(_EN_NOUN_WORDS)
_EN_CAL_NOUN = re.compile(rf"\b(?:{_EN_NOUNS})\b")
_EN_MODAL_BEFORE = re.compile(
    _EN_MODAL_BEFORE.pattern.replace(
        "{v}",
        _alt(
            (
                "cancel",
                "move",
                "add",
                "book",
                "create",
                "schedule",
                "delete",
                "remove",
                "reschedule",
                "change",
            )
        ),
    )
)
_EN_WEEKDAY = (
    r"(?:mon|tues|wednes|thurs|fri|satur|sun)days?|(?:mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)\b"
)
_EN_CLOCK_PAT = r"\b\d{1,2}(?::\d{2})?\s?(?:am|pm|a\.m\.|p\.m\.)|\b\d{1,2}:\d{2}\b|\bnoon\b|\bmidnight\b"
_EN_CLOCK = re.compile(_EN_CLOCK_PAT)
_EN_TIME = re.compile(
    rf"{_EN_CLOCK_PAT}|\b(?:tomorrow|today|tonight|this (?:morning|afternoon|evening|week|weekend)|"
    rf"next (?:week|month|\w+day)|all day|morning|afternoon|evening|weekend|then|that day|{_EN_WEEKDAY})\b"
    r"|\b(?:at|from|after|before|until|between)\s+\d{1,2}\b|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\s+\d{1,2}(?:st|nd|rd|th)?\b"
    # a day of the month ("the 1st", "the 7th") and a month as a span ("this month")
    r"|\bthe\s+\d{1,2}(?:st|nd|rd|th)\b|\b(?:this|next|last)\s+month\b"
)
# A complement clause after a weak verb ("noted that you …") names a fact, not a calendar entry.
_EN_THAT_CLAUSE = re.compile(r"\s+(?:down\s+)?that\s+(?:you|i|we|it|it's|they|he|she|there|this|your)\b")
# A headline's noun phrase holds no verb or subject of its own ("you have a meeting scheduled").
_EN_HEADLINE_GUARD = re.compile(
    r"\b(?:you|your\s+\w+\s+you|have|has|had|there|is|are|was|were|be|been|i|we|if|when|what|which|that|who|"
    r"can|can't|will|won't|should|would|could|must|a|an|any|some|no)\b|n't\b"
)
_EN_IT = re.compile(r"\b(?:it|them|that one|those|both|everything|the \d|your \d)\b")

# Read classes (English).
_EN_AVAIL_WORDS = (
    r"(?:free|busy|available|unavailable|booked solid|booked up|fully booked|double-booked|double booked|overbooked|"
    r"booked|clear|open|wide open|empty|packed|full|light|quiet|slammed|swamped|tied up|occupied|back-to-back|"
    r"busiest|busier|freest|freer|lightest|lighter|quietest|quieter|emptiest|fullest|"
    # how loaded a day is, the opposite of light/quiet
    r"heavy|heavier|heaviest|hectic|crammed|jam-packed|stacked|full-on|manageable)"
)
# "you have / you've got / you don't have / you're free ..." with the user as subject.
_EN_YOU_HAVE = re.compile(
    r"\byou(?:'ve got| have got|'ve|(?:\s+(?:now|still|only|also|already|just|currently|do|then|really))*\s+(?:have|got))\s+"
    r"(?!to\b|been\b|had\b|a (?:point|question|great|good|nice)\b|any (?:questions|other)\b|my\b|our\b)"
    r"|\byou (?:don't|do not|won't|will not)\s+have\b(?!\s+to\b)"
    # "you haven't got anything with Marcus": have-got with its negation is have-not
    r"|\byou (?:haven't|have not|'ve not) got\b(?!\s+to\b)"
)
# "you're meeting Sam at 3": a planned event stated with its time.
_EN_YOU_DOING = re.compile(
    r"\byou(?:'re| are)\s+(?:also\s+|still\s+)?(?:meeting|seeing|having|flying|travell?ing|presenting|interviewing|"
    r"visiting|hosting|attending|speaking|teaching|leaving|playing|joining|catching up|off)\b"
)
# "you had a meeting with Jo on Monday": past contents. Only with a determiner and a calendar noun
# right after "had" ("you had a point", "you had fun" say nothing about the calendar), and not with an
# evaluative adjective: "you had a great call" recalls an experience, not a calendar entry.
_EN_YOU_HAD = re.compile(
    r"\byou(?:\s+(?:also|only|already|just|still|actually|then))*\s+had\s+"
    r"(?:a|an|one|two|three|four|five|six|\d+|no|several|a few|a couple of|some|your|the|that|this)\s+"
    r"(?!(?:great|good|nice|fun|lovely|wonderful|productive|rough|tough|hard|terrible|bad|amazing|fantastic|"
    r"successful|awesome|pleasant|relaxing|stressful|exhausting)\b)"
    rf"(?:[\w'&:-]+\s+){{0,2}}?(?:{_EN_NOUNS})\b"
)
_EN_YOU_ARE = re.compile(
    # (past too: "you were free at 2, so I booked it" reports what the calendar showed)
    rf"\byou(?:'re| are|'ll be| will be| should be| seem| look| were| was)\s+(?:(?:now|still|completely|totally|entirely|pretty|quite|fully|all|also|only|not|otherwise|definitely|mostly)\s+)*"
    rf"{_EN_AVAIL_WORDS}\b(?!\s+to\b)"
)
# "your <calendar thing> is/looks <free, at 3pm, with Bob ...>" and "your next meeting starts at".
_EN_YOUR = re.compile(
    rf"\byour\s+(?:[\w'&:-]+\s+){{0,4}}?(?:{_EN_NOUNS}|day|days|morning|afternoon|evening|night|week|weekend|tomorrow|today|{_EN_WEEKDAY}|\d{{1,2}}(?::\d\d)?\s?(?:am|pm))"
    # the verb after up to four words, or contracted onto the noun ("your schedule's light")
    r"(?:\s+(?:[\w'&-]+\s+){0,4}?|(?='s\b))"
    r"(?P<cop>is|are|'s|looks|look|seems|seem|remains|stays|starts|start|begins|ends|runs|shows|says|has|lists|contains|was)\b\s*(?P<pred>[\w'-]*)"
)
_EN_YOUR_PRED = re.compile(
    rf"^(?:{_EN_AVAIL_WORDS}|at|on|from|with|in|tomorrow|today|tonight|still|already|pretty|quite|fairly|completely|totally|wide|mostly|the|a|an|\d+\S*|one|two|three|four|five|only|just|nothing|empty|no|nearly|almost|set|booked|scheduled|planned|next|this|over|until|till|looking|{_EN_WEEKDAY})$"
)
# Besides calendar nouns and times, these make "you have …" about the calendar.
_EN_READ_CTX = re.compile(
    rf"\b(?:nothing|no|anything|plans?)\b|\b{_EN_AVAIL_WORDS}\s+(?:day|days|week|weekend|morning|afternoon|evening|schedule)\b"
)
_EN_THERE = re.compile(
    r"\bthere(?:'s| is| are|'re| isn't| aren't| is no| are no| are only| is only| is just| is still| are still|'s only|'s still| won't be| will be| seems to be| appears to be)\b"
)
_EN_NOTHING = re.compile(
    rf"\b(?:nothing|no (?:other |more |further )?(?:{_EN_NOUNS})|zero (?:{_EN_NOUNS})|not a single (?:{_EN_NOUNS})|not a thing)\b"
    r"(?!(?:\s+|'s\s+)(?:has|have|was|were|got|is being|will|would|could|can|needs?|been)\b)"
)
_EN_NOTHING_CHANGED = re.compile(
    r"^[^,;]{0,40}?\b(?:has|have|had|was|were|got|gets|will|would|could|can|needs?|is being|been|changed|moved)\b"
)
_EN_NOTHING_CTX = re.compile(
    r"\b(?:on your|in your|scheduled|planned|booked|on for|on the calendar|until|till|before|after)\b"
)
# "the review is on Thursday", "your flight's at 7": a definite event stated to be at a day or time.
# The clause opens with the event; a relative clause that echoes a wish or a mention ("the dinner you
# wanted", "the call you mentioned") makes it the user's request, not the calendar's contents.
_EN_EVENT_AT = re.compile(
    r"^(?:(?:and|but|so|also|yes|yep|yeah|ok|okay|hmm|actually|right|no|nope|good news)\s+)*"
    r"(?:the|your|that|this|both)\s+(?:[\w'\"“”&:-]+\s+){0,3}?"
    rf"(?:{_EN_NOUNS})[\"”]?(?P<gap>(?:\s+[\w'&-]+){{0,4}}?)(?:\s+(?:is|are|was|were)|'s)\s+"
    r"(?:(?:actually|still|really|indeed|definitely|also|only|just|both|all|now|then)\s+)*"
    rf"(?P<at>on|at|from|this|next|tomorrow|today|tonight|{_EN_WEEKDAY})\b(?!'s)"
)
_EN_ECHO_GAP = re.compile(
    r"\b(?:want|wanted|wants|like|need|needed|requested|mentioned|proposed|suggested|described|plan|planned|"
    r"planning|hope|hoped|hoping|trying|said|told|asked for|would|'d|could|should|might)\b"
)
_EN_TIME_SUBJECT = re.compile(
    rf"^(?:(?:and|but|so|also|otherwise|then|plus|ok|okay|good news|great news)\s+)*(?:the\s+)?(?:[\w'&:-]+\s+){{0,3}}?(?:tomorrow|today|tonight|{_EN_WEEKDAY}|(?:morning|afternoon|evening|night|weekend|week|slot|time)s?|\d{{1,2}}(?::\d\d)?\s?(?:am|pm))"
    # (past too: "Saturday was open, so I put the hike in at 8")
    rf"(?:\s+(?:[\w'&-]+\s+){{0,5}}?(?:is|are|was|were|looks|look|seems|seem|stays|remains|'s)|'s)\s+(?:(?:completely|totally|pretty|quite|fairly|wide|all|still|also|now|mostly|entirely|very|already|your|the|both|each|relatively|rather|super|really)\s+)*{_EN_AVAIL_WORDS}\b"
)
# A day as the holder of its entries: "Thursday now just has the standup and the vendor call",
# "Sunday also has brunch at 11", "Tuesday has no conflicts now" (what a day holds, often after a change).
_EN_TIME_HAS = re.compile(
    r"^(?:(?:and|but|so|also|otherwise|then|plus|now|and now)\s+)*(?:the\s+|your\s+|that\s+)?(?:[\w'&:-]+\s+){0,2}?"
    rf"(?:tomorrow|today|tonight|{_EN_WEEKDAY}|(?:morning|afternoon|evening|weekend|week|day)s?)"
    r"(?:\s+(?:(?:now|also|still|only|just|then|already|currently)\s+)*(?:has|had|holds|held|contains|includes)\s+|"
    r"(?:'s|\s+has)\s+(?:(?:now|also|still|only|just)\s+)*got\s+)"
    rf"(?!been\b|to\b)(?:(?:[\w'&:-]+\s+){{0,4}}?(?:{_EN_NOUNS})\b|nothing\b)"
)
_G_HAS = frozenset({"has", "had", "holds", "held", "contains", "includes", "got"})
# What is left after a change: "only the one on the 1st remains", "the only thing left is the 9am
# all-hands". Not a step still to take ("the only thing left is to pick a time").
_EN_REMAIN = re.compile(
    r"\b(?:only|just)\s+(?:[\w'&:-]+\s+){0,5}?(?:remains|remain|is left|are left|is still (?:on|there|in)|are still (?:on|there|in)|stays|survives)\b"
    rf"|\bonly\s+(?:thing|things|one|ones|item|items|{_EN_NOUNS})\s+(?:still\s+)?(?:left|remaining|that's left|that remains)\b"
    r"(?!\s+(?:is|was|are)\s+(?:to|for you)\b|\s+to\b)"
)
_G_REMAIN = frozenset({"remains", "remain", "left", "remaining", "stays", "survives", "still"})
# An entry's place in the day: "that's your last event of the day now", "it's the only meeting
# on Friday". With "the", only a calendar noun ("that's the last thing I need" is an idiom).
_EN_ORDINAL = re.compile(
    r"\b(?:that|it|this|which)(?:'s| is| was| will be|'ll be)\s+(?:(?:now|still|also|then)\s+)*"
    r"(?:your\s+(?:only|first|next|last|final|earliest|latest)\s+(?:[\w'&:-]+\s+){0,2}?(?:thing|things|one|item)\b|"
    r"(?:your|the)\s+(?:only|first|next|last|final|earliest|latest)\s+(?:[\w'&:-]+\s+){0,2}?"
    rf"(?:{_EN_NOUNS})\b)"
)
_EN_OF_DAY = re.compile(r"\b(?:of|for|that|this) (?:the )?(?:day|week|morning|afternoon|evening)\b|\bnow\b")
# What a change leaves: "that leaves your afternoon wide open", "which leaves you with just the standup".
_EN_LEAVES = re.compile(
    r"\b(?:that|which|this|it)\s+(?:now\s+)?(?:leaves|will leave|'ll leave|left)\s+you(?:r\s+(?:[\w'&:-]+\s+){0,2}?[\w'&:-]+)?\s+"
    r"(?:(?:completely|totally|wide|pretty|fully|still|all|just|only|now)\s+)*"
    rf"(?:{_EN_AVAIL_WORDS}\b(?!\s+to\b)|with\s+(?:nothing\b|(?:[\w'&:-]+\s+){{0,3}}?(?:{_EN_NOUNS}|day|days|morning|afternoon|evening|night|week|weekend)\b))"
)
_G_LEAVES = frozenset({"leaves", "leave", "left"})
# "your next physical is on March 2nd": "next"/"upcoming" make any noun an entry of the calendar.
_EN_YOUR_NEXT = re.compile(
    r"\byour\s+(?:next|upcoming)\s+[\w'-]+(?:\s+[\w'-]+)?(?:\s+(?:is|are)|'s)\s+(?:(?:still|now|also)\s+)*"
    rf"(?:on|at|from|this|next|tomorrow|today|tonight|{_EN_WEEKDAY})\b"
)
_G_NEXT = frozenset({"next", "upcoming"})
_G_ORDINAL = frozenset({"only", "first", "next", "last", "final", "earliest", "latest"})
# The calendar as a source ("your calendar shows", "i see you have"), listing headers, overlaps.
_EN_SURFACE_PARTS: tuple[tuple[frozenset[str], re.Pattern[str]], ...] = (
    (
        frozenset({"calendar", "schedule", "agenda", "diary"}),
        re.compile(
            r"\b(?:your|the) (?:calendar|schedule|agenda|diary) (?:(?:shows|says|has|lists|contains)\s+(?!been\b|not\b)\w|"
            r"is (?:empty|clear|free|open|full|packed|busy))\b"
            r"|\b(?:according to|per) your (?:calendar|schedule|agenda|diary)\b|^on your (?:calendar|schedule|agenda)\b"
        ),
    ),
    (
        frozenset({"see", "seen"}),
        re.compile(
            r"\bi (?:can )?see (?:that )?(?:you|there|your)\b|\bi (?:don't|do not|didn't|did not) see (?:any|anything)\b"
            r"|\bi (?:haven't|have not) seen (?:any|anything)\b"
        ),
    ),
    (frozenset({"here", "what"}), re.compile(r"\bhere(?:'s| is| are) (?:your|what you)\b|\bwhat you have\b")),
    # ("heads up" only announces a notice; what follows it must state the contents by itself)
    (frozenset({"looks"}), re.compile(r"\blooks like you\b")),
    (
        frozenset({"only", "first", "next", "last", "earliest", "latest"}),
        re.compile(
            r"\bthe (?:only|first|next|last|earliest|latest) (?:thing|things|item|items|one|event|events)\s+"
            r"(?:on|for|in|at|before|after|tomorrow|today|tonight|this)\b"
        ),
    ),
    (
        frozenset(
            {"overlaps", "overlap", "conflicts", "conflict", "clashes", "clash", "collides", "coincides"}
        ),
        re.compile(r"\b(?:overlaps?|conflicts?|clashes?|collides?|coincides?)\s+with\b"),
    ),
    (
        frozenset({"with", "has", "have"}),
        re.compile(
            r"\b(?:with|has|have)\s+(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|several|a few|many)\s+"
            r"(?:meetings|events|calls|appointments)\b"
        ),
    ),
)


# ──────────────────────────────────────────────────────────────────────────────────────────────
# Clauses and moods
# ──────────────────────────────────────────────────────────────────────────────────────────────

_HAS_CJK = re.compile(r"[\u4e00-\u9fff]")
_HAS_LATIN = re.compile(r"[a-z]")


@dataclass
class _Clause:
    text: str
    void_from: int = 1 << 30  # changes after this offset are proposed, not done (offers, ifs)
    toks: frozenset[str] = frozenset()  # English words of the clause (gates for the patterns)
    digits: bool = False


def _sentences(text: str) -> Iterator[tuple[str, bool]]:
    """(sentence, ends_with_question_mark) pairs."""
    start = 0
    for m in _SENTENCE_END.finditer(text):
        mark = m.group()
        if mark[0] == "." and (
            (m.end() < len(text) and not text[m.end()].isspace())  # 3.5, e.g, a file name
            or _ABBREVIATION.search(text, max(0, m.start() - 2), m.start())
        ):
            continue
        chunk = text[start : m.start()].strip()
        if chunk:
            yield chunk, "?" in mark or "？" in mark
        start = m.end()
    tail = text[start:].strip()
    if tail:
        yield tail, False


# Punctuation to spaces, so that str.split() yields words ("you're" -> "you", "re").
_WORD_BREAKS = str.maketrans(dict.fromkeys("'\".,!?:;()[]{}<>-—–/\\*&@#…“”‘’", " "))
_STRIP = " \t'\"“”‘’「」*-•·"


class _Mood:
    """One language's mood tables, each merged into as few searches as possible."""

    def __init__(
        self,
        opener: re.Pattern[str],
        tag: re.Pattern[str],
        asks: Iterable[re.Pattern[str]],
        cond: re.Pattern[str],
        modal: re.Pattern[str],
        cond_tail: re.Pattern[str] | None,
        cue: re.Pattern[str] | frozenset[str],
        header: re.Pattern[str],
        gates: tuple[frozenset[str], frozenset[str], frozenset[str]] | None = None,
    ) -> None:
        self.opener = opener
        self.tag = tag
        # Searched one by one: an alternation of patterns loses the engine's first-character skip.
        self.asks = tuple(asks)
        self.cond = cond
        self.modal = modal
        self.cond_tail = cond_tail
        self.cue = cue
        self.header = header
        # English only: words without which the conditional / non-assertion / header tables cannot match.
        self.gates = gates

    def _cued(self, text: str) -> bool:
        if isinstance(self.cue, frozenset):
            return bool(self.cue.intersection(text.translate(_WORD_BREAKS).split())) or bool(
                _DIGIT.search(text)
            )
        return bool(self.cue.search(text))

    def clauses(self, sentence: str, asked: bool) -> tuple[list[_Clause], bool]:
        """The clauses of a sentence that might hold a claim, each with its mood; and whether the
        sentence is free of questions and conditions (the enumerated-list check needs that)."""
        if not self._cued(sentence):
            return [], False  # no change verb, no read cue: nothing to split
        parts = _split_clauses(sentence)
        if not parts:
            return [], False
        whole_question = bool(self.opener.search(parts[0])) or (
            asked and len(parts) > 1 and bool(self.tag.search(parts[-1]))
        )
        if whole_question:
            return [], False
        plain = not asked
        out: list[_Clause] = []
        carry = False  # the previous clause was a protasis ("如果你确认，" / "if you confirm,")
        last = len(parts) - 1
        gates = self.gates
        for i, t in enumerate(parts):
            toks = frozenset(t.translate(_WORD_BREAKS).split()) if gates is not None else frozenset()
            if (gates is None or toks & gates[2]) and self.header.search(t):
                # "我的功能包括：创建日程、…" / "for example: …": the rest of the sentence describes.
                return out, False
            conditional = carry
            m = None if gates is not None and not (toks & gates[0]) else self.cond.search(t)
            carry = bool(m and (m.start() <= 2 or (self.cond_tail is not None and self.cond_tail.search(t))))
            if m or conditional:
                plain = False
            if conditional or (asked and i == last):
                continue
            digits = False
            if isinstance(self.cue, frozenset):
                digits = _DIGIT.search(t) is not None
                if not (toks & self.cue or digits):
                    continue
            elif not self.cue.search(t):
                continue
            if (gates is None or toks & gates[1]) and any(rx.search(t) for rx in self.asks):
                plain = False
                continue
            void = m.start() if m else 1 << 30
            mm = self.modal.search(t, 0, void)
            out.append(_Clause(t, void_from=mm.start() if mm else void, toks=toks, digits=digits))
        return out, plain


_EDGE = re.compile(r"^[\W_]+|[\W_]+$")
_DIGIT = re.compile(r"\d")
_CLAUSE_CHARS = str.maketrans(dict.fromkeys("，,（）()：—–", "\x00"))
# Emoji and pictographs end a clause like a comma does: "Done ✅ Booked the vet for 9" holds two
# clauses, and a receipt that opens with its verb must be seen at its clause's start.
_EMOJI = re.compile("[\u2300-\u23ff\u2600-\u27bf\u2b00-\u2bff\U0001f000-\U0001faff]+[\ufe0f\u200d]*")
_COLON = re.compile(r":(?!\d)|(?<!\d):")


def _split_clauses(sentence: str) -> list[str]:
    """Clauses: split at commas, brackets, dashes, a colon outside a clock time, and the contrast
    words that open a new assertion ("，但", "but", "不过")."""
    s = sentence.translate(_CLAUSE_CHARS)
    if not s.isascii():
        s = _EMOJI.sub("\x00", s)
    if ":" in s:
        s = _COLON.sub("\x00", s)
    for word in ("但是", "但", "不过", "可是", "只是", " but ", " - ", "--"):
        if word in s:
            s = s.replace(word, "\x00")
    parts = (p.strip(_STRIP) for p in s.split("\x00"))
    # Leading check marks, emoji and markdown ("✅ 已创建", "**Done**") are not words.
    return [_EDGE.sub("", p) if not (p[0].isalnum() and p[-1].isalnum()) else p for p in parts if p]


# ──────────────────────────────────────────────────────────────────────────────────────────────
# Chinese detection
# ──────────────────────────────────────────────────────────────────────────────────────────────


def _zh_negated(before: str) -> bool:
    return any(m.group(2) for m in _ZH_NEG.finditer(before))


def _zh_subject(clause: str, end: int) -> str:
    """The last pronoun acting before `end`: 我 (agent), 你 (user) or '' (none)."""
    last = ""
    for m in _ZH_PRONOUN.finditer(clause, 0, end):
        last = "我" if m.group().startswith("我") else "你"
    return last


def _zh_write(c: _Clause, sentence: str) -> tuple[bool, bool]:
    """(write claim, read claim) from change verbs in one assertive clause."""
    m: re.Match[str] | None
    t = c.text
    for m in _ZH_VERB_RE.finditer(t):
        word = m.group()
        strong = word in _ZH_STRONG
        if not strong and word not in _ZH_WEAK:
            continue  # a look-alike (参加, 建议, 改天 ...)
        start, end = m.span()
        if start >= c.void_from:
            return False, False
        # The negation window starts after the last 已 before the verb (已经不需要…取消 is negative).
        before = t[max(0, start - 8) : start]
        if _zh_negated(before):
            continue
        after = t[end:]
        stop = _ZH_AFTER_STOP.search(after)
        scope = after[: stop.start()] if stop else after
        if _ZH_FAILED.search(after[:12]):
            continue
        # Searched in the whole rest, so that the marker's lookahead sees what follows ("删了就…").
        perfective = _ZH_PERFECTIVE.search(after)
        done = bool(_ZH_ALREADY.search(t, 0, start)) or bool(
            perfective and perfective.start() < min(len(scope), 18)
        )
        if not done:
            continue
        if not strong:
            rest = _ZH_PERFECTIVE.split(scope, maxsplit=1)
            elided = len(rest) > 1 and not rest[1].strip(" ～~！!。.啦呀哦喔了")
            if not (
                elided or _ZH_CAL_NOUN.search(sentence) or _ZH_TIME.search(sentence) or _ZH_FOR_YOU.search(t)
            ):
                continue
        if _zh_subject(t, start) == "你":
            return False, True  # "你明天安排了三个会": the user's own calendar, i.e. its contents
        return True, False
    m = _ZH_STATE_CHANGE.search(t)
    if (
        m
        and m.start() < c.void_from
        and not _zh_negated(t[max(0, m.start() - 6) : m.start()])
        and (m.group().startswith("在") or _ZH_CAL_NOUN.search(sentence))
    ):
        return True, False
    return False, False


def _offered(mood: _Mood, sentence: str, asked: bool) -> bool:
    """The sentence asks or offers: an event it names at a time is the user's request echoed back
    ("The class is at 6pm, want me to add it?"), not the calendar's contents."""
    return asked or bool(mood.modal.search(sentence))


def _zh_no_change(t: str, pos: int) -> bool:
    """After 没有/没 at `pos`: a change that did not happen ("没有变化", "没有创建成功"). A verb that is
    also a calendar noun (安排, 预约) keeps its noun reading: "没有安排" is emptiness."""
    if _ZH_NO_CHANGE.match(t, pos):
        return True
    v = _ZH_VERB_RE.match(t, pos)
    if v is None:
        return False
    word = v.group()
    # (a noun that opens with a verb keeps its noun reading too: "没有约见")
    return (word in _ZH_STRONG or word in _ZH_WEAK) and not _ZH_CAL_NOUN.match(t, pos)


def _zh_read(c: _Clause, sentence: str, asked: bool = False) -> bool:
    m: re.Match[str] | None
    t = c.text
    lim = min(len(t), c.void_from)
    s = _ZH_SURFACE.search(t)
    if s and s.start() < lim and _zh_subject(t, s.start()) != "我" and not _zh_no_change(t, s.end()):
        return True
    for m in _ZH_AVAIL.finditer(t):
        if m.start() >= lim:
            break
        word = m.group()
        subj = _zh_subject(t, m.start())
        if subj == "我" or _ZH_SEARCH_VERB.search(t, max(0, m.start() - 4), m.start()):
            continue
        head = t[: m.start()]
        if word in ("闲", "忙", "有时间", "没时间", "有事"):
            if not _ZH_TIME.search(head) and not _ZH_CAL_NOUN.search(head):
                continue
        elif not (subj == "你" or _ZH_TIME.search(head) or _ZH_CAL_NOUN.search(head) or _ZH_TIME.search(t)):
            continue
        return True
    for m in _ZH_HAVE.finditer(t):
        if m.start() >= lim:
            break
        subj = _zh_subject(t, m.start())
        if subj == "我":
            continue
        head = t[: m.start()]
        if not (subj == "你" or _ZH_TIME.search(head) or _ZH_CAL_NOUN.search(head)):
            continue
        if _zh_no_change(t, m.end()):
            continue
        tail = t[m.end() : m.end() + 14]
        if _ZH_CAL_NOUN.search(tail) or _ZH_COUNT.search(tail):
            return True
    times = list(_ZH_TIME.finditer(t, 0, lim))
    for m in times:
        # "明天上午9点是站会": a time that *is* an event.
        if _ZH_TIME_IS_EVENT.search(t, m.end(), lim):
            return True
        # "周五一共两个会", "明天3场面试": a time and a count of events.
        n = _ZH_COUNT_AFTER_TIME.match(t, m.end())
        # (from the classifier on: "两个会" is a count of 个会)
        if n and n.end() <= lim and _ZH_CAL_NOUN.search(t, n.end() - 1, min(lim, n.end() + 6)):
            return True
        # "那天就这一件事": a counted 事 right after a time is what the day holds
        if n and t.startswith("事", n.end()) and n.end() < lim:
            return True
    if times:
        # "你和赵律师约的是11月20号": the time of an arrangement.
        for m in _ZH_ARRANGED_AT.finditer(t, 0, lim):
            if (
                _ZH_TIME.match(t, m.end())
                and not _ZH_EVALUATIVE.search(t)
                and _zh_subject(t, m.start()) != "我"
                and not _offered(_ZH_MOOD, sentence, asked)
            ):
                return True
        # "评审会是在周四": an event at a day or time.
        for m in _ZH_EVENT_AT.finditer(t, 0, lim):
            if (
                _ZH_TIME.match(t, m.end())
                and not _ZH_EVALUATIVE.search(t)
                and _zh_subject(t, m.start()) != "我"
                and not _offered(_ZH_MOOD, sentence, asked)
            ):
                return True
    return False


# A range of clock times ("9点到11点", "14:00-16:00", "3-4pm") is one slot, not two entries.
_RANGE = re.compile(r"(?<=\d|点|半|分)\s*(?:到|至|-|–|—|~|～|to)\s*(?=\d|[一二三四五六七八九十两]+点)")


def _clocks(rx: re.Pattern[str], sentence: str) -> int:
    n = len(rx.findall(sentence))
    return n - len(_RANGE.findall(sentence)) if n >= 2 else n


def _zh_list(sentence: str) -> bool:
    """An enumerated list of times with titles ("9点站会、11点客户会、下午3点评审会")."""
    return _clocks(_ZH_CLOCK, sentence) >= 2 and bool(
        _ZH_CAL_NOUN.search(sentence) or "你" in sentence or "您" in sentence
    )


# ──────────────────────────────────────────────────────────────────────────────────────────────
# English detection
# ──────────────────────────────────────────────────────────────────────────────────────────────


def _en_blocked(t: str, start: int, c: _Clause) -> bool:
    if start >= c.void_from:
        return True
    before = t[:start]
    if any(m.group("neg") for m in _EN_NEG.finditer(before)):
        return True
    return bool(_EN_MODAL_TAIL.search(before))


def _en_context(sentence: str) -> bool:
    return bool(_EN_CAL_NOUN.search(sentence) or _EN_TIME.search(sentence) or _EN_IT.search(sentence))


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _first_words(forms: Iterable[str]) -> frozenset[str]:
    return frozenset(f.split()[0] for f in forms)


# Gates: a pattern runs only when one of its anchor words is among the clause's tokens. Most clauses
# hold none of them, and a set intersection costs far less than a regex scan.
_G_FORMS = _first_words(_EN_STRONG_FORMS + _EN_WEAK_FORMS)
_G_DONE = frozenset().union(*(gate for gate, _ in _EN_DONE_PARTS))
_G_MANAGED = frozenset({"managed", "able", "got"})
_G_NOTHING = frozenset({"nothing", "no", "zero", "not"})
_G_SURFACE = frozenset().union(*(gate for gate, _ in _EN_SURFACE_PARTS))
_G_TIME = _words(
    "tomorrow today tonight morning afternoon evening weekend week slot time noon midnight am "
    "mornings afternoons evenings night nights weekends weeks slots times "
    "pm monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur "
    "thurs fri sat sun mondays tuesdays wednesdays thursdays fridays saturdays sundays"
)
_G_EVENT_AT = frozenset({"the", "your", "that", "this", "both"})
# "your next meeting starts ...", "your calendar shows ...": the verb states contents by itself.
_EN_YOUR_CONTENT_VERBS = frozenset(
    {"starts", "start", "begins", "ends", "runs", "shows", "lists", "contains", "has"}
)
# After "your meeting has/is ...", these words make it a change (done or not done), not the contents.
_EN_CHANGE_WORDS = frozenset({"been", "now", "not", "never", "just", "already"}) | _G_FORMS
_STATE_FORMS = frozenset(
    {"scheduled", "booked", "set", "planned", "arranged", "reserved", "confirmed", "blocked", "blocked off"}
)


def _en_write(c: _Clause, sentence: str) -> tuple[bool, bool]:
    m: re.Match[str] | None
    t, toks = c.text, c.toks
    if toks & _G_FORMS:
        for rx in (_EN_AGENT_DID, _EN_PERF_PASSIVE, _EN_ELLIPTIC, _EN_HEADLINE):
            if rx is _EN_AGENT_DID and not ("i" in toks or "we" in toks):
                continue
            if rx is _EN_PERF_PASSIVE and "been" not in toks:
                continue
            for m in rx.finditer(t):
                v = m.group("v")
                if _en_blocked(t, m.start(), c):
                    continue
                if v in _EN_ALSO_INTRANSITIVE and (rx is _EN_HEADLINE or t.startswith(" up", m.end())):
                    continue
                if (
                    rx is _EN_ELLIPTIC
                    and v in _EN_BASE_EQUALS_PAST
                    and not re.match(r"\s+for\b", t[m.end() :])
                ):
                    continue
                if rx is _EN_HEADLINE and (
                    not _EN_CAL_NOUN.search(m.group("np")) or _EN_HEADLINE_GUARD.search(m.group("np"))
                ):
                    continue
                if v not in _EN_STRONG and (not _en_context(sentence) or _EN_THAT_CLAUSE.match(t, m.end())):
                    continue  # "noted that you prefer mornings": a fact noted, not an event
                return True, False
        for m in _EN_PASSIVE.finditer(t):
            if _en_blocked(t, m.start(), c):
                continue
            v = m.group("v")
            if v not in _EN_STRONG and not _en_context(sentence):
                continue
            state = m.group("cop") in ("is", "are", "'s", "'re") and "now" not in m.group("adv")
            if state and v in _STATE_FORMS:
                return (
                    True,
                    True,
                )  # "your appointment is booked for 9": a receipt, and a statement of contents
            return True, False
    for gate, rx in (*_EN_DONE_PARTS, (_G_MANAGED, _EN_MANAGED)):
        if toks & gate:
            m = rx.search(t)
            if m and not _en_blocked(t, m.start(), c):
                return True, False
    if "you" in toks and toks & _G_FORMS:
        m = _EN_USER_DID.search(t)
        if m and not _en_blocked(t, m.start(), c) and _en_context(sentence):
            return False, True
    return False, False


def _en_read(c: _Clause, sentence: str, asked: bool = False) -> bool:
    m: re.Match[str] | None
    t, toks = c.text, c.toks
    ctx = None

    def context() -> bool:
        nonlocal ctx
        if ctx is None:
            ctx = bool(_EN_CAL_NOUN.search(t) or _EN_TIME.search(t) or _EN_READ_CTX.search(t))
        return ctx

    if "you" in toks:
        for m in _EN_YOU_HAVE.finditer(t):
            if not _en_blocked(t, m.start(), c) and context():
                return True
        if "had" in toks:
            m = _EN_YOU_HAD.search(t)
            if m and not _en_blocked(t, m.start(), c):
                return True
        m = _EN_YOU_DOING.search(t)
        # (a plan restated before an offer or a question is the user's own, echoed back: "So you're
        # seeing the dentist at 3 — should I add it?")
        if (
            m
            and not _en_blocked(t, m.start(), c)
            and _EN_TIME.search(t, m.end())
            and not _offered(_EN_MOOD, sentence, asked)
        ):
            return True
        m = _EN_YOU_ARE.search(t)
        # "busy" alone is often sympathy ("you're so busy"); with a time it is a statement of the day.
        if (
            m
            and not _en_blocked(t, m.start(), c)
            and (not re.search(r"busy|slammed|swamped|tied up|occupied", m.group()) or _EN_TIME.search(t))
        ):
            return True
    if "there" in toks:
        for m in _EN_THERE.finditer(t):
            if not _en_blocked(t, m.start(), c) and context():
                return True
    if "your" in toks:
        for m in _EN_YOUR.finditer(t):
            if _en_blocked(t, m.start(), c) or m.group("pred") in _EN_CHANGE_WORDS:
                continue
            pred = m.group("pred")
            if not pred:
                continue  # a streamed prefix ending at the verb ("your calendar has"): wait for more
            if m.group("cop") in _EN_YOUR_CONTENT_VERBS or _EN_YOUR_PRED.match(pred):
                return True
    if toks & _G_NOTHING:
        m = _EN_NOTHING.search(t)
        if m and not _en_blocked(t, m.start(), c):
            tail = t[m.end() :]
            if not _EN_NOTHING_CHANGED.search(tail) and (
                _EN_NOTHING_CTX.search(tail) or _EN_TIME.search(tail)
            ):
                return True
    if toks & _G_TIME or c.digits:
        m = _EN_TIME_SUBJECT.search(t)
        if m and not _en_blocked(t, m.start(), c):
            return True
        if toks & _G_EVENT_AT:
            m = _EN_EVENT_AT.search(t)
            if (
                m
                and not _en_blocked(t, m.start(), c)
                and not _EN_ECHO_GAP.search(m.group("gap"))
                and _EN_TIME.search(t, m.start("at"))
                and not _offered(_EN_MOOD, sentence, asked)
            ):
                return True
    if toks & _G_HAS and (toks & _G_TIME or c.digits):
        m = _EN_TIME_HAS.search(t)
        if m and not _en_blocked(t, m.start(), c):
            return True
    if toks & _G_REMAIN:
        m = _EN_REMAIN.search(t)
        if m and not _en_blocked(t, m.start(), c) and context():
            return True
    if toks & _G_LEAVES:
        m = _EN_LEAVES.search(t)
        if m and not _en_blocked(t, m.start(), c):
            return True
    if "your" in toks and toks & _G_NEXT:
        m = _EN_YOUR_NEXT.search(t)
        if m and not _en_blocked(t, m.start(), c) and _EN_TIME.search(t, m.start()):
            return True
    if toks & _G_ORDINAL:
        m = _EN_ORDINAL.search(t)
        # ... of a day or a time: "it's your first meeting with them" is about the people
        if m and not _en_blocked(t, m.start(), c) and (_EN_TIME.search(t) or _EN_OF_DAY.search(t)):
            return True
    for gate, rx in _EN_SURFACE_PARTS:
        if toks & gate:
            m = rx.search(t)
            if m and not _en_blocked(t, m.start(), c):
                return True
    return False


def _en_list(sentence: str) -> bool:
    return _clocks(_EN_CLOCK, sentence) >= 2 and bool(
        _EN_CAL_NOUN.search(sentence) or re.search(r"\byou(?:r|'ve|'re)?\b", sentence)
    )


# ──────────────────────────────────────────────────────────────────────────────────────────────
# API
# ──────────────────────────────────────────────────────────────────────────────────────────────


_ZH_MOOD = _Mood(
    opener=_ZH_QUESTION_OPEN,
    tag=_ZH_TAG,
    asks=(_ZH_QUESTION_END, _ZH_QUESTION_ANYWHERE, _ZH_NON_ASSERT),
    cond=_ZH_COND,
    modal=_ZH_MODAL_BEFORE,
    cond_tail=_ZH_COND_TAIL,
    header=_ZH_HEADER,
    # A clause without any of these cannot hold a claim: skip its mood tables.
    # (共/计: totals; 个/场/项/件/节: counts of events; 松/紧/密: how loaded a day is; 据/看: the
    # calendar as evidence)
    cue=re.compile(
        _alt((*_ZH_STRONG_VERBS, *_ZH_WEAK_VERBS, *"有没空闲忙满冲撞重显如是剩在为共计个场项件节松紧密据看"))
    ),
)
_EN_MOOD = _Mood(
    opener=_EN_QUESTION_OPEN,
    tag=_EN_TAG,
    asks=(_EN_NON_ASSERT, _EN_IMPERATIVE),
    cond=_EN_COND,
    modal=_EN_MODAL_BEFORE,
    cond_tail=None,
    header=_EN_HEADER,
    cue=_G_FORMS
    | _G_DONE
    | _G_MANAGED
    | _G_NOTHING
    | _G_SURFACE
    | _G_TIME
    | _words("you your there heads according"),
    gates=(
        _words("if unless once whenever as in provided assuming until till before after when whether"),
        _words(
            "sorry sounds sounded said mentioned told hope hoping wish luck enjoy have know sure tell see access "
            "unable checked checking example e such try say saying imagine suppose pretend pity shame must "
            "so and oh ok okay noted thanks thank letting heads glad happy nice great "
            "just please maybe perhaps also then simply always never don do instead first"
        )
        | frozenset(_EN_IMPERATIVE_VERBS),
        _words(
            "things help features for instance e such tip tips suggestion suggestions example examples try say "
            "ideas here how"
        ),
    ),
)


# The agent says it has not looked at (or cannot see) the calendar: nothing in that sentence states
# what the calendar holds, whichever clause the not-looking is in ("Heads up: I haven't checked
# your calendar yet", "提醒一下：我还没查你的日程"). Reads only: a change can still be reported.
_NOT_LOOKED = re.compile(
    r"还没查|还没有查|没有查|没查|还没看|还没有看|尚未查|无法访问|没法访问|无法查看|没法查看|无法读取|没有权限|没权限|"
    r"\b(?:haven't|have not|hasn't|didn't|did not|not yet)\s+(?:yet\s+)?(?:checked|looked|opened|pulled up|gone through)\b"
    r"|\bwithout (?:checking|looking)\b"
    r"|\b(?:don't|do not|can't|cannot|no)\s+(?:have\s+)?access\b|\bunable to (?:access|see|open|read)\b"
)

# A header that reports a list of operations as done ("**已完成以下操作：**", "Here's what I did:"):
# the items under it are the changes made (新建/邀请/提醒 …), not the calendar's contents.
_DONE_HEADER = re.compile(
    r"已(?:经)?(?:完成|执行|处理|办好|办妥|搞定|做好|做)了?(?:以下|如下|下列|下面|这些|这几)[^，。：:]{0,4}?"
    r"(?:操作|更改|改动|修改|变更|调整|设置|事项|事情|任务)|(?:操作|更改|改动|修改|变更)(?:都|均)?已(?:经)?(?:完成|生效|执行)"
    # a bare completion that opens a list ("已完成：", "全部搞定：")
    r"|(?:已经?|都已经?|全部|均已)(?:完成|执行|处理好|办好|办妥|搞定|做好|弄好)了?[:：]"
    r"|\bhere(?:'s| is) what i(?:'ve)? (?:did|done|changed|updated|set up)\b"
    r"|\b(?:i|we)(?:'ve| have)? (?:made|done|completed|applied|carried out) the following\b"
)
_DONE_CUE = re.compile(r"已|搞定|办好|办妥|弄好|here|following")


def _done_header(text: str) -> bool:
    """`text` reports operations as done, and nothing before that makes it a condition or an offer
    ("如果操作已完成：…", "once I've made the following changes")."""
    m = _DONE_HEADER.search(text) if _DONE_CUE.search(text) else None
    if m is None:
        return False
    head = text[: m.start()]
    return not any(rx.search(head) for rx in (_ZH_COND, _ZH_MODAL_BEFORE, _EN_COND, _EN_MODAL_BEFORE))


# A list item: a bullet or a number opens the line.
_ITEM = re.compile(r"[-•*·+]|\d{1,2}[.、)）]")


def _done_lists(norm: str) -> tuple[str, bool]:
    """`norm` without the lines of completed-operations lists (their header and the items under it),
    and whether there was one."""
    lines = norm.split("\n")
    keep: list[str] = []
    found = in_list = False
    for line in lines:
        stripped = line.strip()
        if in_list and _ITEM.match(stripped):
            continue
        in_list = False
        if stripped and stripped[-1] not in "?？" and _done_header(stripped):
            found = in_list = True
            continue
        keep.append(line)
    return "\n".join(keep), found


# Words that make an enumeration a proposal rather than the calendar's contents.
_HEDGE = re.compile(
    r"可以|可能|建议|推荐|候选|选项|备选|任选|选一个|"
    r"\b(?:could|might|would|may|options?|suggest|suggestions?|ideas?|proposals?|possible|possibly|candidates?|"
    r"prefer|choose|pick)\b"
)


@lru_cache(maxsize=4096)
def _sentence_claims(sentence: str, asked: bool) -> tuple[bool, bool]:
    """(write, read) asserted by one normalised sentence. Memoised: a streamed reply re-checks its
    finished sentences on every prefix, and only the growing last one is new."""
    write, read = _sentence_found(sentence, asked)
    if read and _NOT_LOOKED.search(sentence):
        read = False
    return write, read


def _sentence_found(sentence: str, asked: bool) -> tuple[bool, bool]:
    write = read = False
    if not asked:
        write = _done_header(sentence)  # "已完成以下操作：新建…、邀请…"
    ascii_only = sentence.isascii()
    for zh in (True, False):
        if zh and (ascii_only or not _HAS_CJK.search(sentence)):
            continue
        if not zh and not ascii_only and not _HAS_LATIN.search(sentence):
            continue
        mood = _ZH_MOOD if zh else _EN_MOOD
        clauses, plain = mood.clauses(sentence, asked)
        for c in clauses:
            w, r = _zh_write(c, sentence) if zh else _en_write(c, sentence)
            write = write or w
            read = read or r or (_zh_read(c, sentence, asked) if zh else _en_read(c, sentence, asked))
            if write and read:
                return True, True
        if not read and plain and (_zh_list(sentence) if zh else _en_list(sentence)):
            # "我可以约9点、10点的会", "slots that could work: 10am, 2pm": offers, not contents
            read = not (mood.modal.search(sentence) or _HEDGE.search(sentence))
    return write, read


def _listed_lines(norm: str) -> bool:
    """A list over lines ("- 周一 9:00 晨会\n- 周二 14:00 评审"): at least two lines with a clock time,
    a calendar noun or the user in the reply, and no line that asks, offers, conditions or gives
    examples."""
    lines = [line.strip() for line in norm.split("\n") if line.strip()]
    timed = [line for line in lines if _ZH_CLOCK.search(line) or _EN_CLOCK.search(line)]
    if len(timed) < 2:
        return False
    if not (_ZH_CAL_NOUN.search(norm) or _EN_CAL_NOUN.search(norm) or re.search(r"[你您]|\byour?\b", norm)):
        return False
    for line in lines:
        if line[-1] in "?？":
            return False
        for mood in (_ZH_MOOD, _EN_MOOD):
            if any(rx.search(line) for rx in (mood.opener, *mood.asks, mood.modal, mood.header, mood.cond)):
                return False
    return True


def find_claims(text: str) -> Claims:
    """The claims asserted by `text` (a whole reply or a streamed prefix of one)."""
    if not text:
        return NONE
    norm = text.replace("’", "'").replace("‘", "'").lower()
    write = read = False
    if "\n" in norm and _DONE_CUE.search(norm):
        norm, write = _done_lists(norm)
    for sentence, asked in _sentences(norm):
        w, r = _sentence_claims(sentence, asked)
        write = write or w
        read = read or r
        if write and read:
            break
    if not read and "\n" in norm:
        read = _listed_lines(norm)
    return Claims(write, read) if write or read else NONE


def claims_creation(text: str) -> bool:
    """Alias kept while the runner switches to `find_claims`: the reply asserts a calendar change."""
    return find_claims(text).write


def claims_schedule_read(text: str) -> bool:
    """Alias kept while the runner switches to `find_claims`: the reply asserts calendar contents."""
    return find_claims(text).read
