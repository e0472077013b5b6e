"""Every string of the page, in Chinese and English, and which of the two a request gets.

One catalog serves both sides: the template renders the first paint in the negotiated language,
and the script (which gets the same catalog as `/web/i18n.json`) renders everything it builds and
switches language in place. Words the page *sends* on the user's behalf (`reply.*`) live here too,
so a button says exactly what a person would type in that language.
"""

from __future__ import annotations

import re
from typing import Literal

Lang = Literal["zh", "en"]
LANGS: tuple[Lang, ...] = ("zh", "en")
DEFAULT_LANG: Lang = "en"  # a browser that asks for neither reads English more often than Chinese
LANG_COOKIE = "calagent_lang"

# key: (中文, English). `{name}` marks a value filled in by the script.
CATALOG: dict[str, tuple[str, str]] = {
    "app.title": ("calagent 日历助手", "calagent calendar assistant"),
    "app.tagline": ("用一句话安排日程", "Your calendar, in a sentence"),
    "app.skip": ("跳到对话", "Skip to the chat"),
    "app.main_label": ("日历助手", "Calendar assistant"),
    "lang.switch": ("English", "中文"),
    # The switch's accessible name is its visible text (WCAG 2.5.3); this describes it.
    "lang.switch_help": ("切换到英文界面", "Switch the page to Chinese"),
    "user.signed_in_as": ("已登录：{user}（{tz}）", "Signed in as {user} ({tz})"),
    "user.sign_out": ("退出", "Sign out"),
    # ---- sign-in
    "signin.heading": ("登录", "Sign in"),
    "signin.token_label": ("Bearer 令牌", "Bearer token"),
    "signin.token_help": (
        "最简单的方式：请管理员运行“calagent login-link 用户名”，打开它打印的链接（10 分钟内有效，只能用一次）。"
        "也可以在这里粘贴“calagent token 用户名”打印的令牌。令牌只保存在这个标签页中，关闭即清除。",
        "The easiest way: ask whoever runs calagent for a sign-in link (the command “calagent login-link "
        "USER” prints one; it works once, within 10 minutes). Or paste here the token that the command "
        "“calagent token USER” prints. It stays in this tab only and is gone when the tab closes.",
    ),
    "signin.error_link": (
        "这个登录链接无效、已过期或已经用过，请要一个新的。",
        "This sign-in link is not valid, has expired or was already used; ask for a new one.",
    ),
    "signin.token_submit": ("登录", "Sign in"),
    "signin.oidc": ("使用 {name} 登录", "Sign in with {name}"),
    "signin.dev_heading": ("开发模式", "Development mode"),
    "signin.dev_help": (
        "服务器开启了开发登录（CALAGENT_WEB_DEV_SIGNIN），可以直接为任意用户名签发令牌。生产环境切勿开启。",
        "The server has development sign-in on (CALAGENT_WEB_DEV_SIGNIN), so a token can be issued for "
        "any user name. Never turn it on in production.",
    ),
    "signin.dev_user_label": ("用户名", "User name"),
    "signin.dev_submit": ("以这个用户名登录", "Sign in as this user"),
    "signin.error_refused": (
        "令牌无效或已过期，请重新登录。",
        "The token was refused or has expired; sign in again.",
    ),
    "signin.error_empty": ("请先填写。", "Fill this in first."),
    "signin.error_network": ("连不上服务器，请稍后再试。", "Could not reach the server; try again."),
    "signin.signed_out": ("已退出。", "Signed out."),
    # ---- chat
    "chat.heading": ("对话", "Chat"),
    "chat.log_label": ("对话记录", "Conversation"),
    "chat.empty": (
        "还没有消息。告诉我一个安排试试。",
        "No messages yet. Tell me about something to schedule.",
    ),
    "chat.input_label": ("消息", "Message"),
    "chat.input_placeholder": ("例如：明天下午三点和张三开会", "e.g. Lunch with Ana tomorrow at noon"),
    "chat.input_help": ("按 Enter 发送，Shift+Enter 换行。", "Enter sends; Shift+Enter starts a new line."),
    "chat.send": ("发送", "Send"),
    "chat.you": ("你", "You"),
    "chat.assistant": ("助手", "Assistant"),
    "chat.working": ("正在处理…", "Working…"),
    "chat.tool": ("{name} → {result}", "{name} → {result}"),
    "chat.tools_label": ("这一轮调用的工具", "Tools this turn called"),
    "chat.model_calls": ("模型调用 {n} 次", "{n} model call(s)"),
    "chat.details": ("技术细节", "Technical details"),
    "chat.undo": ("撤销", "Undo"),
    "changes.heading": ("最近的修改", "Recent changes"),
    "changes.empty": ("还没有修改。", "No changes yet."),
    "changes.undo": ("撤销", "Undo"),
    "changes.undone": ("已撤销", "Undone"),
    "changes.kind.created": ("新建", "Added"),
    "changes.kind.updated": ("修改", "Changed"),
    "changes.kind.deleted": ("删除", "Removed"),
    "changes.source.chat": ("对话", "chat"),
    "changes.source.api": ("页面", "page"),
    "changes.source.sync": ("同步", "sync"),
    "changes.error": ("读取修改记录失败：{message}", "Could not load the changes: {message}"),
    "chat.history_more": ("显示更早的消息", "Show earlier messages"),
    "chat.history_error": ("读取对话记录失败：{message}", "Could not load the conversation: {message}"),
    "chat.error": ("这条消息没有完成：{message}", "This message did not go through: {message}"),
    "chat.stream_cut": ("连接在回复完成前中断了。", "The connection dropped before the reply was finished."),
    # ---- the pending command
    "card.heading": ("待处理的请求", "Pending request"),
    "card.status.needs_date": ("需要选一天", "Needs a day"),
    "card.status.needs_time": ("需要一个时间", "Needs a time"),
    "card.status.conflict": ("与已有日程冲突", "Conflicts with your calendar"),
    "card.status.held": ("等你确认", "Waiting for your confirmation"),
    "card.status.needs_attendee": ("需要确认是谁", "Needs a person"),
    "card.known": ("已知信息", "What is known"),
    "card.field.title": ("标题", "Title"),
    "card.field.date": ("日期", "Date"),
    "card.field.time": ("开始时间", "Start time"),
    "card.field.end_time": ("结束时间", "End time"),
    "card.field.duration_minutes": ("时长（分钟）", "Duration (minutes)"),
    "card.field.all_day": ("全天", "All day"),
    "card.field.calendar": ("日历", "Calendar"),
    "card.field.end_date": ("结束日期", "End date"),
    "card.field.recurrence": ("重复", "Repeats"),
    "card.field.reminder_minutes": ("提前提醒（分钟）", "Reminder (minutes before)"),
    "card.candidates": ("选一天", "Pick a day"),
    "card.which_event": ("是哪一个？", "Which one?"),
    "card.ask_time": ("直接回复一个时间，例如“下午两点”。", "Reply with a time, e.g. “2pm”."),
    "card.change": ("改动", "The change"),
    "card.proposal": ("要发给对方的时间", "Times to propose"),
    "card.booking": ("对方选了这个时间", "The time they chose"),
    "card.proposal.attendee": ("发给", "To"),
    "card.proposal.zone": ("对方的时区", "Their time zone"),
    "card.proposal.zone_unknown": ("不知道（只写你的时间）", "Not known (your times only)"),
    "card.counter": ("对方提议改时间", "A new time proposed"),
    "card.counter.proposer": ("提议人", "Proposed by"),
    "card.counter.time": ("提议的时间", "Proposed time"),
    "card.replan": ("任务块要挪的位置", "Task blocks to move"),
    "card.replan.removed": ("放不下，移除", "No room: removed"),
    "card.replan.new": ("新加一块", "A new block"),
    "card.replan.missing": ("{title}：截止前还差 {n} 分钟", "{title}: {n} minutes short before its due"),
    "card.task_change": (
        "日历里也改过这个任务，要再按我的修改改",
        "Also changed in your calendar: make my change again",
    ),
    "card.task_change.removal": (
        "日历里改过这个任务，所以它还在。还要删除它",
        "Changed in your calendar, so it is still there: remove it anyway",
    ),
    "card.task_change.title": ("标题", "Title"),
    "card.task_change.duration_minutes": ("时长（分钟）", "Duration (minutes)"),
    "card.task_change.due": ("截止", "Due"),
    "card.task_change.priority": ("优先级", "Priority"),
    "card.task_change.percent": ("进度", "Progress"),
    "card.task_change.done": ("状态", "Status"),
    "card.task_change.is_done": ("已完成", "Done"),
    "card.task_change.is_open": ("未完成", "Open"),
    "card.before": ("之前", "Before"),
    "card.after": ("之后", "After"),
    "card.removed": ("删除", "Removed"),
    "card.why.past_start": (
        "开始时间已经过去，确认后才会记下。",
        "The start is in the past: it is written only once you confirm.",
    ),
    "card.why.third_party_content": (
        "这个请求来自转发或引用的内容，要你本人确认。",
        "This request came from forwarded or quoted content: it needs your own word.",
    ),
    "card.why.recurrence_plan": (
        "重复日程先给你看规则和接下来几次，确认后才创建。",
        "A repeating event is shown as a plan first: it is created once you confirm.",
    ),
    "card.why.recurrence_unclear": (
        "你的话里说了重复，但请求里没有重复规则，请确认只记一次。",
        "Your words speak of repeating but the request has no rule: confirm it happens once.",
    ),
    "card.why.change_confirmation": (
        "改动和删除都要你确认后才生效。",
        "Changes and removals take effect only once you confirm.",
    ),
    "card.why.sends_invitations": (
        "确认后才会给参与者发邀请邮件。",
        "The invitations are e-mailed to the attendees only once you confirm.",
    ),
    "card.why.automation_plan": (
        "自动化只保存为方案，不会自己运行。",
        "An automation is kept as a plan: nothing runs by itself.",
    ),
    "card.why.sync_conflict": (
        "已连接的日历也改了这个日程，保留了它的版本；你的改动等你确认。",
        "Your connected calendar changed this event too: its version was kept, and your change waits "
        "for your word.",
    ),
    "card.why.which_event": (
        "找到了几个符合的日程，先选是哪一个，再确认改动。",
        "Several events match: pick the one you mean, then confirm the change.",
    ),
    "card.why.conflict": ("这个时间和已有日程冲突。", "This time meets something already on your calendar."),
    "card.field.first": ("第一次", "First"),
    "card.field.rule": ("重复规则", "Repeats"),
    "card.next": ("接下来几次", "The next ones"),
    "card.confirm": ("确认", "Confirm"),
    "card.cancel": ("取消", "Cancel"),
    "card.expires_in": ("{time} 后失效", "Expires in {time}"),
    "card.expired": ("已失效", "Expired"),
    "card.countdown_label": ("剩余时间", "Time left"),
    # An invitation received by mail (contract §16): answered with the words a person would type.
    "card.invite.heading": ("收到邀请", "You are invited"),
    "card.invite.cancelled_heading": ("邀请已取消", "An invitation was cancelled"),
    "card.invite.why_request": (
        "你的答复会发给组织者；接受或暂定会把它加入你的日历。",
        "Your answer is e-mailed to the organizer; accepting or answering tentatively adds it to your "
        "calendar.",
    ),
    "card.invite.why_cancel": (
        "组织者取消了这个日程；确认后才会从你的日历删除。",
        "The organizer cancelled this event: it leaves your calendar only once you confirm.",
    ),
    "card.invite.accept": ("接受", "Accept"),
    "card.invite.tentative": ("暂定", "Tentative"),
    "card.invite.decline": ("拒绝", "Decline"),
    "card.invite.remove": ("从我的日历删除", "Remove it from my calendar"),
    "card.invite.keep": ("保留", "Keep it"),
    # Contract §19: an invitation from someone not in the contacts is offered, and says so.
    "card.invite.stranger": ("发件人不在你的联系人中。", "From someone not in your contacts."),
    # Offers from outside that wait beside the conversation (contract §19), each on its own card.
    "waiting.heading": ("等你答复", "Waiting for your answer"),
    "waiting.help": (
        "邀请和同步冲突会一直等你答复，你在对话里说的其他事不会取消它们。",
        "Invitations and sync conflicts wait for your answer; nothing else you ask in the "
        "conversation ends them.",
    ),
    # The words a button sends: what a person would type (contract §7, §8).
    "reply.confirm": ("确认", "confirm"),
    # The n-th of the events a change asks about (contract §20), as a person would type it.
    "reply.ordinal": ("第{n}个", "number {n}"),
    "reply.accept": ("接受", "accept"),
    "reply.tentative": ("暂定", "tentative"),
    "reply.decline": ("拒绝", "decline"),
    "reply.weekday.1": ("周一", "Monday"),
    "reply.weekday.2": ("周二", "Tuesday"),
    "reply.weekday.3": ("周三", "Wednesday"),
    "reply.weekday.4": ("周四", "Thursday"),
    "reply.weekday.5": ("周五", "Friday"),
    "reply.weekday.6": ("周六", "Saturday"),
    "reply.weekday.7": ("周日", "Sunday"),
    # ---- a repeating rule in words
    "rule.DAILY": ("每天", "every day"),
    "rule.DAILY.n": ("每 {n} 天", "every {n} days"),
    "rule.WEEKLY": ("每周", "every week"),
    "rule.WEEKLY.n": ("每 {n} 周", "every {n} weeks"),
    "rule.MONTHLY": ("每月", "every month"),
    "rule.MONTHLY.n": ("每 {n} 个月", "every {n} months"),
    "rule.YEARLY": ("每年", "every year"),
    "rule.YEARLY.n": ("每 {n} 年", "every {n} years"),
    "rule.on_days": ("{days}", " on {days}"),
    "rule.on_monthday": ("{n} 日", " on day {n}"),
    "rule.count": ("，共 {n} 次", ", {n} times"),
    "rule.until": ("，到 {date} 为止", ", until {date}"),
    "rule.list_sep": ("、", ", "),
    # ---- an event's details
    "event.heading": ("日程详情", "Event details"),
    "event.when": ("时间", "When"),
    "event.place": ("地点", "Place"),
    "event.notes": ("备注", "Notes"),
    "event.calendar": ("日历", "Calendar"),
    "event.rule": ("重复", "Repeats"),
    "event.reminder": ("提醒", "Reminder"),
    "event.move": ("改时间", "Move"),
    "event.delete": ("删除", "Delete"),
    "event.close": ("关闭", "Close"),
    "event.move_date": ("新日期", "New date"),
    "event.move_time": ("新开始时间", "New start time"),
    "event.move_submit": ("改到这个时间", "Move it there"),
    "event.scope": ("用于", "Apply to"),
    "event.scope.this": ("仅这一次", "This one only"),
    "event.scope.following": ("这次及以后", "This and later ones"),
    "event.scope.all": ("整个系列", "The whole series"),
    "event.sent": ("已提交，请在上方确认。", "Sent; confirm it above."),
    "event.error": ("没有完成：{message}", "Not done: {message}"),
    # ---- views
    "view.label": ("视图", "View"),
    "view.week": ("周", "Week"),
    "view.month": ("月", "Month"),
    "month.prev": ("上个月", "Previous month"),
    "month.this": ("本月", "This month"),
    "month.next": ("下个月", "Next month"),
    "month.more": ("还有 {n} 项", "{n} more"),
    # ---- the week
    "week.heading": ("一周日程", "The week"),
    "week.range": ("{start} – {end}", "{start} – {end}"),
    "week.prev": ("上一周", "Previous week"),
    "week.this": ("本周", "This week"),
    "week.next": ("下一周", "Next week"),
    "week.today": ("今天", "Today"),
    "week.empty_day": ("无安排", "Nothing"),
    "week.all_day": ("全天", "All day"),
    "week.day_of": ("第 {i}/{n} 天", "day {i} of {n}"),
    "week.series": ("重复日程", "repeating"),
    "week.reminder": ("提前 {n} 分钟提醒", "reminder {n} min before"),
    "week.completed": ("已完成", "done"),
    "week.calendar": ("日历：{name}", "calendar: {name}"),
    "week.task_block": ("任务：{title}", "task: {title}"),
    "week.loading": ("正在读取…", "Loading…"),
    # ---- tasks (contract §21)
    "tasks.heading": ("任务", "Tasks"),
    "tasks.empty": ("还没有任务。", "No tasks yet."),
    "tasks.due": ("截止 {when}", "due {when}"),
    "tasks.at_risk": ("截止前还差 {n} 分钟", "{n} min short before the due"),
    "tasks.error": ("读取任务失败：{message}", "Could not load the tasks: {message}"),
    "week.error": ("读取日程失败：{message}", "Could not load the week: {message}"),
    "weekday.1": ("周一", "Mon"),
    "weekday.2": ("周二", "Tue"),
    "weekday.3": ("周三", "Wed"),
    "weekday.4": ("周四", "Thu"),
    "weekday.5": ("周五", "Fri"),
    "weekday.6": ("周六", "Sat"),
    "weekday.7": ("周日", "Sun"),
    # ---- the private feed
    "feed.heading": ("日历订阅", "Calendar feed"),
    "feed.help": (
        "日历应用（Apple 日历、Google 日历、Thunderbird、Outlook）可以不带令牌订阅这个私密地址。"
        "再次创建会换成新地址，旧地址随即失效。",
        "Calendar apps (Apple Calendar, Google Calendar, Thunderbird, Outlook) can subscribe to this "
        "private address without a token. Creating it again replaces it; the old one stops working.",
    ),
    "feed.create": ("创建私密订阅地址", "Create a private feed address"),
    "feed.rotate": ("换一个新地址", "Replace with a new address"),
    "feed.url_label": ("私密订阅地址", "Private feed address"),
    "feed.copy": ("复制地址", "Copy the address"),
    "feed.copied": ("已复制。", "Copied."),
    "feed.copy_failed": (
        "无法自动复制，请选中地址后手动复制。",
        "Could not copy; select the address and copy it.",
    ),
    "feed.error": ("没有创建成功：{message}", "Could not create it: {message}"),
    # ---- settings
    "settings.open": ("设置", "Settings"),
    "settings.heading": ("设置", "Settings"),
    "settings.close": ("关闭", "Close"),
    "settings.prefs": ("时区、语言和工作时间", "Zone, language and working hours"),
    "settings.tz": ("时区", "Time zone"),
    "settings.tz_help": (
        "IANA 时区名，例如 Asia/Shanghai。“明天”“下午三点”都按这个时区理解，日程也按它显示。",
        "An IANA zone name such as Europe/Berlin. “Tomorrow” and “3pm” are read in it, and the "
        "calendar is shown in it.",
    ),
    "settings.language": ("语言", "Language"),
    "settings.language_auto": ("跟随浏览器", "As the browser says"),
    "settings.email": ("我的电子邮件地址", "My e-mail address"),
    "settings.email_help": (
        "别人的联系人里写着这个地址时，指的就是你（用于找大家都有空的时间）。",
        "A contact with this address is you (used to find a time that suits several people).",
    ),
    "settings.invitations": ("邮件邀请", "Invitations by mail"),
    "settings.invitations_everyone": (
        "所有人的邀请都给我看（不在联系人中的会注明）",
        "Show me everyone's (those from people not in my contacts are marked)",
    ),
    "settings.invitations_known": (
        "只看我自己和联系人发来的邀请",
        "Only from my own address and my contacts",
    ),
    "settings.hours": ("工作时间", "Working hours"),
    "settings.works": ("上班", "Working"),
    "settings.from": ("开始", "From"),
    "settings.until": ("结束", "Until"),
    "settings.save": ("保存", "Save"),
    "settings.saved": ("已保存。", "Saved."),
    "settings.error": ("没有保存：{message}", "Not saved: {message}"),
    "settings.load_error": ("读取设置失败：{message}", "Could not load the settings: {message}"),
    # ---- connected calendars
    "accounts.heading": ("已连接的日历", "Connected calendars"),
    "accounts.empty": ("还没有连接其他日历。", "No calendar account is connected yet."),
    "accounts.account": ("{user} · {host}", "{user} · {host}"),
    "accounts.default": ("新日程写入", "New events go to"),
    "accounts.synced": ("上次同步：{when}", "Last synced {when}"),
    "accounts.never_synced": ("还没有同步过。", "Not synced yet."),
    "accounts.syncing": (
        "正在同步：{done}/{total} 个日历，已读 {events} 个日程",
        "Syncing: {done} of {total} calendars, {events} events",
    ),
    "accounts.pending": ("{count} 个改动等待发送", "{count} changes waiting to be sent"),
    "accounts.rejected": ("{count} 个改动被服务器拒绝", "{count} changes the server refused"),
    "accounts.last_error": ("最近的问题（{when}）：{message}", "Last problem ({when}): {message}"),
    "accounts.withheld": (
        "日历 {calendar} 现在只显示 {shows}/{had} 个日程：这里先保留 {missing} 个，等你确认是否删除。",
        "Your calendar {calendar} now shows {shows} of {had} events: {missing} are kept here until you say "
        "whether to remove them.",
    ),
    "accounts.withheld_one": (
        "日历 {calendar} 里已经没有 {missing} 个日程：这里先保留，等你确认是否删除。",
        "{missing} events are gone from your calendar {calendar}: they are kept here until you say whether to "
        "remove them.",
    ),
    "accounts.disconnect": ("断开 {host}", "Disconnect {host}"),
    "accounts.connect_heading": ("连接 CalDAV 日历", "Connect a CalDAV calendar"),
    "accounts.url": ("服务器地址", "Server address"),
    "accounts.user": ("用户名", "User name"),
    "accounts.password": ("应用专用密码", "App password"),
    "accounts.password_help": (
        "密码加密保存，只用来同步日历，任何回答里都不会出现。",
        "The password is stored encrypted, used only to sync, and never shown again.",
    ),
    "accounts.connect": ("连接", "Connect"),
    "accounts.connecting": ("正在连接…", "Connecting…"),
    "accounts.connected": ("已连接。", "Connected."),
    "accounts.default_set": ("默认日历已更改。", "The default calendar is changed."),
    "accounts.disconnected": ("已断开。", "Disconnected."),
    "accounts.error": ("没有完成：{message}", "Not done: {message}"),
    # ---- the private mail address
    "mail.heading": ("私密邮件地址", "Private mail address"),
    "mail.help": (
        "把邀请或邮件转发到这个地址，助手会读到它；别人回复你的邀请也会寄到这里。不要公开它。",
        "Forward invitations or mail to this address and the assistant reads them; replies to your "
        "invitations come back here. Keep it to yourself.",
    ),
    "mail.show": ("显示我的私密邮件地址", "Show my private mail address"),
    "mail.label": ("私密邮件地址", "Private mail address"),
    "mail.error": ("没有拿到地址：{message}", "Could not get the address: {message}"),
    # ---- free/busy sharing
    "sharing.heading": ("共享忙闲", "Free/busy sharing"),
    "sharing.help": (
        "让这里的其他用户在找共同空闲时间时看到你什么时候忙；他们只看到忙闲，看不到标题、地点或备注。",
        "Let another user here see when you are busy when they look for a time that suits you both; "
        "they see busy times only, never titles, places or notes.",
    ),
    "sharing.with": ("对方的用户名", "Their user name"),
    "sharing.add": ("共享", "Share"),
    "sharing.stop": ("停止与 {user} 共享", "Stop sharing with {user}"),
    "sharing.from": ("与我共享忙闲的人", "Sharing their free/busy with me"),
    "sharing.error": ("没有完成：{message}", "Not done: {message}"),
    # ---- people on an event
    "people.organizer": ("组织者", "Organizer"),
    "people.attendees": ("参与者", "Attendees"),
    "people.status.accepted": ("已接受", "accepted"),
    "people.status.declined": ("已拒绝", "declined"),
    "people.status.tentative": ("暂定", "tentative"),
    "people.status.needs-action": ("未回复", "no answer yet"),
    "people.status.delegated": ("已委托", "delegated"),
    "people.recipients": ("邀请将发给", "Invitations go to"),
    "people.which": ("“{query}”是哪一位？", "Which “{query}”?"),
    "people.nobody": (
        "联系人里没有“{query}”。直接回复对方的邮件地址，或者取消。",
        "No contact is called “{query}”. Reply with their e-mail address, or cancel.",
    ),
    # ---- where the time went
    "timeline.show": ("耗时明细", "Where the time went"),
    "timeline.hide": ("收起耗时明细", "Hide where the time went"),
    "timeline.caption": ("这一轮的分段耗时，共 {ms} 毫秒", "This turn's segments, {ms} ms in all"),
    "timeline.col.segment": ("环节", "Segment"),
    "timeline.col.start": ("开始（毫秒）", "Starts at (ms)"),
    "timeline.col.ms": ("耗时（毫秒）", "Took (ms)"),
    "timeline.col.bar": ("时间轴", "Waterfall"),
    "timeline.loading": ("正在读取…", "Loading…"),
    "timeline.missing": ("这一轮的耗时还没有记录。", "This turn's timeline is not recorded yet."),
    "timeline.error": ("读取耗时失败：{message}", "Could not load the timeline: {message}"),
    # ---- errors
    "error.network": ("连不上服务器。", "Could not reach the server."),
}

PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


def catalog(lang: Lang) -> dict[str, str]:
    index = LANGS.index(lang)
    return {key: pair[index] for key, pair in CATALOG.items()}


def catalogs() -> dict[str, dict[str, str]]:
    return {lang: catalog(lang) for lang in LANGS}


def _tag_lang(tag: str) -> Lang | None:
    primary = tag.strip().lower().split("-")[0]
    if primary == "zh":
        return "zh"
    if primary == "en":
        return "en"
    return None


def negotiate(accept_language: str | None, cookie: str | None = None) -> Lang:
    """The page's language: the user's own choice (a cookie the language switch sets), else the
    first of Chinese or English the browser ranks highest (RFC 9110 quality values)."""
    if cookie in LANGS:
        return "zh" if cookie == "zh" else "en"
    ranked: list[tuple[float, int, Lang]] = []
    for position, item in enumerate((accept_language or "").split(",")):
        tag, _, params = item.partition(";")
        lang = _tag_lang(tag)
        if lang is None:
            continue
        quality = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if quality > 0:
            ranked.append((-quality, position, lang))
    if not ranked:
        return DEFAULT_LANG
    return min(ranked)[2]
