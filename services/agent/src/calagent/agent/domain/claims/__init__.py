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
and only assertive clauses are searched for the verb, completion, object and read classes. Each class
is a closed lexical table with a comment saying why it exists, kept as data per language
(`data/zh.toml`, `data/en.toml`, read once by `lexicon.py`); code, not one regex, combines them:
`clauses.py` (sentences, clauses, moods), `zh.py` and `en.py` (each language's write and read
claims), `detect.py` (a whole reply, its lists and headers). `find_claims` is pure and fast (it runs
on every streamed prefix of a reply).
"""

from calagent.agent.domain.claims.detect import Claims, claims_creation, claims_schedule_read, find_claims

__all__ = ["Claims", "claims_creation", "claims_schedule_read", "find_claims"]
