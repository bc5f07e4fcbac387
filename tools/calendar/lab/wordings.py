"""The openings of the calendar scenario templates, as data: eight wordings per template and
language, in one place, so a test can hold the splits' wordings against each other and against the
drills' by construction.

Index = the scenario's ``phrasing`` (``tools.calendar.lab.scenarios`` says which split holds it):
0-1 train (the shipped demo adapter was trained on them), 2 and 4-5 dev, 3 and 6-7 test. 0-3 are
the wordings each template had before 2026-12-06, unchanged, so a wording key such as
``delete_request/en3`` means the same sentence in older runs; 4-7 were added then so each held
split has three wordings per template and language instead of one.

Placeholders are those of the wording drill's frames (``tools.calendar.lab.wording_drill``):
{title} {d} (the day as ``template_kit.day_words`` says it), {t} (a start), {new} (a new start),
{dur}, {a} {b} (two people), {wd} (a weekday), {md} ("December 11"), {occ} (a series' occurrence:
"on Friday December 11"), {n} (how many times a series repeats). Each placeholder stands where the
words read naturally whatever they are: an English {d} may be "on December 9", so it is never
after "for" or "of", nor first in a sentence; a Korean one takes no particle whose form depends on
the last syllable, nor does a Korean {title} or name (``하고``, ``씨와`` and bare words instead).
No wording names a day other than through {d}, {occ} or {md}: the date notes
(``tools.calendar.date_notes``) would note it, and a test checks what they note.
"""

from __future__ import annotations

from typing import Any

Wordings = dict[str, tuple[str, ...]]  # language -> eight wordings

WORDINGS: dict[str, Wordings] = {
    "missing_info": {
        "en": (
            'Put "{title}" on my calendar {d}.',
            'Can you add "{title}" {d}?',
            'Schedule "{title}" {d}, please.',
            'I need "{title}" in my calendar {d}.',
            'Could you set up "{title}" for me {d}?',
            'I\'ve got "{title}" {d}. Please add it to my calendar.',
            'Pencil in "{title}" {d}, would you?',
            'Please make a calendar entry for "{title}" {d}.',
        ),
        "ko": (
            '{d} "{title}" 일정 잡아줘.',
            '"{title}" 일정 {d} 추가해 줄래?',
            '{d} "{title}" 넣어줘.',
            '{d} 일정에 "{title}" 등록해 줘.',
            '{d} "{title}" 일정 좀 만들어 주세요.',
            '{d} "{title}" 일정 있어. 캘린더에 추가해 줄래?',
            '{d} "{title}" 등록 부탁드려요.',
            '캘린더에 "{title}" 하나 넣어 둬, {d} 일정이야.',
        ),
    },
    "delete_request": {
        "en": (
            'Delete my "{title}" {d}.',
            'Please remove "{title}" {d} from my calendar.',
            'Cancel the "{title}" {d}.',
            'Get rid of "{title}" {d}.',
            'Can you clear "{title}" {d} from my schedule?',
            '"{title}" {d} isn\'t happening. Delete it, please.',
            'Would you erase the "{title}" I have {d}?',
            'Please drop "{title}" {d}; I won\'t be going.',
        ),
        "ko": (
            '{d} "{title}" 일정 삭제해 줘.',
            '{d} 있는 "{title}" 지워줘.',
            '{d} "{title}" 취소해 줘.',
            '"{title}" 일정 {d} 빼줘.',
            '{d} "{title}" 일정 지워 주세요.',
            '"{title}" {d} 거 캘린더에서 삭제해 줄래?',
            '{d} 잡아 둔 "{title}" 일정 취소해 주세요.',
            '"{title}" 일정 없어졌어, {d} 거 지워.',
        ),
    },
    "conflict_create": {
        "en": (
            'Add "{title}" {d} at {t} for {dur}. If that time is taken, use the first free time after it that day.',
            'Book "{title}" {d} at {t}, {dur}. If I\'m busy then, take the earliest free slot after that on the '
            'same day.',
            'Schedule "{title}" {d} {t} for {dur}; if it clashes with something, move it to the next free time '
            'that day.',
            'Please put "{title}" at {t} {d} ({dur}). Busy then? Then the first open slot after {t} that day.',
            'Can you fit "{title}" in {d} at {t}? It\'s {dur}. Should that clash with another event, slide it to '
            'the earliest gap later that day.',
            'I\'d like {dur} for "{title}" {d}, starting {t}. If something\'s already booked then, go with the next '
            'opening later that same day.',
            'Set "{title}" for {t} {d}, {dur} long. In case that slot is occupied, book the soonest available time '
            'afterwards, same day.',
            '"{title}", {dur}, {d} at {t} please. If there\'s a conflict, just push it to whenever I\'m next free '
            'that day.',
        ),
        "ko": (
            '{d} {t}에 "{title}" {dur} 잡아줘. 그 시간에 일정이 있으면 그날 그 이후 제일 빠른 빈 시간으로 해줘.',
            '"{title}" {d} {t}부터 {dur} 넣어줘. 겹치면 그날 다음 빈 시간에 넣어.',
            '{d} {t} "{title}" {dur} 예약해 줘. 이미 일정이 있으면 그 뒤 첫 빈 시간으로.',
            '{d} {t}에 "{title}" 추가해 줘, {dur}짜리야. 안 되면 같은 날 그 후 제일 빠른 시간으로.',
            '{d} {t}에 "{title}" 일정 {dur} 동안 넣어 주세요. 그 시간이 비어 있지 않으면 당일 그다음으로 가능한 '
            '시간에 부탁드려요.',
            '"{title}" 일정 잡아 줄래? {d} {t}, {dur}. 혹시 그때 선약이 있으면 그날 안에서 그 뒤로 제일 빨리 비는 때로.',
            '{d} {t}부터 {dur} 동안 "{title}" 예약 부탁해요. 다른 일정이랑 겹치면 같은 날 그 뒤 가장 먼저 비는 '
            '시간으로 옮겨 주세요.',
            '"{title}" {dur}짜리, {d} {t}에 넣어 줘. 그 시간이 안 되면 그날 그 뒤로 제일 먼저 비는 시간에.',
        ),
    },
    "delete_after_approval": {
        "en": (
            'Delete the "{title}" {d} at {t}. I confirm, no need to ask; leave the others alone.',
            'Yes, I\'m sure: remove "{title}" {d} at {t}, only that one.',
            'Go ahead and delete "{title}" at {t} {d}. You have my approval. Keep the other ones.',
            'Approved: cancel the {t} "{title}" {d}. Don\'t touch anything else.',
            'Please get rid of the {t} "{title}" {d}; you don\'t have to check with me. The other entries '
            'stay.',
            '"{title}" {d} at {t} can go. Consider this my OK to delete it straight away, and only that '
            'event.',
            'Delete "{title}" at {t} {d}, no confirmation needed from me. Everything else remains as it is.',
            'I approve deleting the {t} "{title}" {d}. Just do it without asking, and spare the rest.',
        ),
        "ko": (
            '{d} {t} "{title}" 삭제해 줘. 확인했으니 바로 지워도 돼. 다른 건 그대로 둬.',
            '{d} {t}에 있는 "{title}"만 지워줘. 승인할게.',
            '"{title}" {d} {t} 거 취소해 줘. 확인 없이 진행해도 돼, 나머지는 건드리지 마.',
            '{d} {t} "{title}" 일정 삭제 승인. 그것만 지워줘.',
            '{d} {t} "{title}" 일정 지워 주세요. 제가 확인했으니 묻지 않으셔도 돼요. 다른 일정은 손대지 마세요.',
            '"{title}" 일정, {d} {t} 거 바로 삭제해. 동의하니까 확인 필요 없어. 딴 건 놔두고.',
            '{d} {t}에 잡힌 "{title}" 지워도 돼요, 승인합니다. 나머지 일정은 그대로 두세요.',
            '확인 안 해도 되니까 {d} {t} "{title}" 일정 하나만 빼 줘.',
        ),
    },
    "multi_attendee": {
        "en": (
            'Set up "{title}" with {a} and {b} {d} for {dur}, at the earliest time all of us are free.',
            'Find a time {d} when {a}, {b} and I are all free and book "{title}" there ({dur}, earliest possible).',
            'I need {dur} with {a} and {b} {d} for "{title}". Put it at the first time we\'re all free.',
            'Schedule "{title}" {d} with {a} and {b}, {dur}, as early as everyone is free.',
            '{a}, {b} and I need {dur} together {d} for "{title}". Grab the earliest time none of us has anything on.',
            'Check {a}\'s, {b}\'s and my calendars {d} and put "{title}" ({dur}) at the first time that suits '
            'all three.',
            'Please arrange "{title}" for {dur} {d} with {a} and {b}, at the soonest point when we\'re all available.',
            'What\'s the first opening {d} that works for {a}, {b} and me? Book {dur} of "{title}" then.',
        ),
        "ko": (
            '{d} {a}, {b}랑 "{title}" {dur} 잡아줘. 다 같이 되는 제일 빠른 시간으로.',
            '{d} 나랑 {a}, {b} 모두 비는 제일 이른 시간에 "{title}" {dur} 넣어줘.',
            '"{title}" {d} {a}, {b}랑 같이 {dur}. 셋 다 되는 가장 빠른 시간으로 예약해 줘.',
            '{a}랑 {b} 다 같이 {d} "{title}" {dur} 하려고. 제일 빠른 공통 빈 시간에 잡아줘.',
            '{d} {a} 씨, {b} 씨하고 "{title}" 일정 {dur} 잡아 주세요. 세 사람 모두 시간이 되는 가장 이른 때로요.',
            '{a}, {b}하고 나, 이렇게 셋이 {d} "{title}" 해야 해. {dur}, 제일 먼저 다 같이 되는 시간으로 넣어 줘.',
            '{d} "{title}" 일정을 {a} 씨, {b} 씨와 함께 {dur} 동안 하려고 해요. 모두 가능한 가장 빠른 시간에 넣어 주세요.',
            '{d} {a}, {b}하고 "{title}" {dur} 할 거야. 셋 다 일정 없는 제일 이른 시간으로 잡아.',
        ),
    },
    "no_tool": {
        "en": ("Hi there!", "Who are you?", "What can you help me with?", "Thanks, that's all for now.",
               "Hey! Anyone there?", "What kinds of things can you do for me?", "Good evening! Just saying hello.",
               "Great, thanks for your help!"),
        "ko": ("안녕하세요!", "너는 누구야?", "뭘 도와줄 수 있어?", "고마워, 이제 됐어.",
               "저기요, 계세요?", "어떤 걸 부탁할 수 있어요?", "처음 뵙겠습니다. 잘 부탁드려요.", "덕분에 잘 해결됐어, 고마워!"),
    },
    "reschedule": {
        "en": (
            'Move my "{title}" {d} to {new}.',
            'Can you reschedule "{title}" {d} to {new}?',
            'Push "{title}" {d} to {new}, please.',
            'Change the time of "{title}" {d}: make it {new}.',
            'I need "{title}" {d} moved to {new}.',
            'Could you bump "{title}" {d} to a {new} start?',
            'Please have "{title}" {d} begin at {new} instead.',
            '"{title}" {d} works better at {new}. Can you change it?',
        ),
        "ko": (
            '{d} "{title}" {new}로 옮겨줘.',
            '{d} "{title}" 일정 {new}로 바꿔 줄래?',
            '"{title}" {d} {new}로 변경해 줘.',
            '{d} 있는 "{title}" 시간 {new}로 미뤄줘.',
            '"{title}" 일정을 {d} {new}로 조정해 주세요.',
            '{d} "{title}" 시간 좀 바꿔 줄래? {new}로.',
            '{d} 예정된 "{title}" 일정, {new}로 옮길 수 있을까요?',
            '"{title}" {d} {new}에 하자. 일정 수정해 줘.',
        ),
    },
    "recurring_create": {
        "en": (
            'Add "{title}" every {wd} at {t} for {dur}, {n} times.',
            'Put "{title}" on my calendar weekly on {wd}s at {t}, {dur} each, for the next {n} weeks.',
            'I have "{title}" every {wd} at {t} ({dur}); add it, {n} sessions starting this coming {wd}.',
            'Please make "{title}" a weekly event: {wd}s, {t}, {dur}, {n} weeks in a row.',
            'Starting the coming {wd}, schedule "{title}" weekly at {t} for {dur}. Stop after {n} weeks.',
            'Could you add a recurring "{title}"? {wd}s at {t}, {dur} long, {n} occurrences.',
            '"{title}" happens each {wd} at {t} and lasts {dur}. Put {n} weeks of it on my calendar.',
            'Set "{title}" to repeat weekly, {wd} at {t}, {dur}, ending after {n} sessions.',
        ),
        "ko": (
            '매주 {wd} {t}에 "{title}" {dur} 등록해줘. {n}번.',
            '"{title}" 매주 {wd} {t}부터 {dur}씩, {n}주 동안 잡아줘.',
            '이번에 오는 {wd}부터 매주 {t} "{title}" {dur}, {n}회 넣어줘.',
            '{n}주 동안 매주 {wd} {t}에 "{title}" 일정 추가해 줘, {dur}짜리야.',
            '"{title}" 반복 일정 만들어 주세요. 매주 {wd} {t}, {dur} 동안이고 {n}회면 돼요.',
            '앞으로 {n}주 동안 {wd}마다 "{title}" 넣어 줄래? {t} 시작해서 {dur}.',
            '매주 {wd}에 "{title}" 일정이 있어요. {t}부터 {dur}, {n}번 반복으로 등록 부탁드립니다.',
            '{wd} {t} "{title}" 매주 반복, {dur}씩 {n}회. 캘린더에 넣어.',
        ),
    },
    "cancel_one_occurrence": {
        "en": (
            'Cancel only this week\'s "{title}" ({occ}); keep the other weeks.',
            'Skip "{title}" {occ} just this once. The series stays.',
            'Remove the "{title}" {occ} only, not the whole series.',
            'I can\'t make "{title}" {occ}. Delete just that one.',
            'Please delete "{title}" {occ}, that single occurrence; the weekly series continues.',
            'I\'ll miss "{title}" {occ}, so take that one out. Leave the other weeks alone.',
            'Could you cancel just the "{title}" {occ}? Don\'t touch any other week.',
            'No "{title}" for me {occ}. Remove that date only; the series itself stays put.',
        ),
        "ko": (
            '이번 주 "{title}"만 취소해 줘 ({occ}). 다른 주는 그대로.',
            '{occ} "{title}" 한 번만 빼줘. 반복 일정은 유지해.',
            '{occ} 있는 "{title}"만 삭제해 줘, 전체 말고.',
            '{occ} "{title}"은 못 가. 그날 것만 지워줘.',
            '{occ} "{title}" 일정 하나만 지워 주세요. 나머지 반복 일정은 그대로 두시고요.',
            '{occ}에는 "{title}" 참석 못 해. 그 날짜 것만 빼 줄래?',
            '매주 하는 "{title}" 중 {occ} 거만 취소 부탁드려요.',
            '"{title}" {occ} 건은 빠질게. 전체 시리즈 말고 그날 하루만 삭제해.',
        ),
    },
    "move_one_occurrence": {
        "en": (
            'Move just the "{title}" {occ} to {new}; the other weeks stay as they are.',
            'This week only, "{title}" {occ} should be at {new}.',
            'Push the "{title}" {occ} to {new}, only that occurrence.',
            'Change the time of "{title}" {occ} to {new} — not the whole series.',
            'Please make the "{title}" {occ} start at {new}. Only that date changes.',
            'Could you shift "{title}" {occ} to {new}? The rest of the weekly ones keep their usual time.',
            '"{title}" {occ} needs to be at {new} this time. Leave the series otherwise unchanged.',
            'For that one occurrence {occ}, move "{title}" to {new}. Every other week stays.',
        ),
        "ko": (
            '{occ} "{title}"만 {new}로 옮겨줘. 다른 주는 그대로.',
            '이번 주만 {occ} "{title}" {new}로 바꿔 줘.',
            '{occ} "{title}" 그날 것만 {new}로 변경해 줘.',
            '반복 전체 말고 {occ} "{title}"만 {new}로 미뤄줘.',
            '{occ} "{title}" 일정 시간을 {new}로 바꿔 주세요. 그 회차만요.',
            '"{title}" 매주 하는 거, {occ}만 {new}에 할 수 있게 옮겨 줄래?',
            '{occ} 하루만 "{title}" 시작을 {new}로 조정해 주세요. 나머지는 원래 시간대로요.',
            '{occ} 거 "{title}"만 {new}로 해 줘, 나머지 주는 놔두고.',
        ),
    },
    "delete_series_after_approval": {
        "en": (
            'Delete the whole "{title}" series (every {wd} at {t}), starting with the one on {md}. I confirm, no '
            'need to ask.',
            'Yes, I\'m sure: remove every "{title}" on {wd}s at {t} (next one {md}).',
            'Approved: drop the weekly "{title}" ({wd} {t}, next on {md}) entirely.',
            'Cancel all of the {wd} {t} "{title}" meetings, the one on {md} included. You have my approval.',
            'Please remove the {wd} {t} "{title}" series altogether, from {md} onwards. You don\'t need to confirm '
            'with me.',
            'The {wd} "{title}" at {t} is over for good: delete the whole series, {md} included. Consider it approved.',
            'I\'m ending "{title}", so delete every {wd} {t} occurrence, beginning with {md}. No need to double-check.',
            '"{title}" every {wd} at {t}: wipe the entire series, the {md} session too. I\'ve already approved it.',
        ),
        "ko": (
            '매주 {wd} {t} "{title}" 반복 일정 전부 삭제해 줘 ({md} 것 포함). 확인했으니 바로 지워도 돼.',
            '{md}부터 매주 {wd} {t} "{title}" 전체 지워줘. 승인할게.',
            '매주 {wd} "{title}" ({t}, 다음은 {md}) 반복 전체 취소해 줘. 확인 없이 진행해.',
            '{wd} {t} "{title}" 시리즈 통째로 삭제 승인. {md} 것도.',
            '매주 {wd} {t} "{title}", 이제 안 해요. {md} 것부터 반복 일정 전체 삭제해 주세요. 확인 절차 없이 '
            '진행하셔도 됩니다.',
            '{wd}마다 하던 "{title}" ({t}) 전부 없애. {md} 거부터 다. 승인했으니까 바로 해.',
            '"{title}" 시리즈 끝났어. 매주 {wd} {t} 일정 {md} 것까지 몽땅 지워 줘. 확인 안 받아도 돼.',
            '매주 {wd} {t}에 잡힌 "{title}" 반복 일정, 전체 삭제에 동의할게요. 다음 회차인 {md} 것도 함께요.',
        ),
    },
    "all_day_create": {
        "en": (
            'Mark {d} as "{title}", all day.',
            'Add "{title}" {d} as an all-day event.',
            'I\'m off {d}: put "{title}" on the whole day.',
            'Block the whole day {d} for "{title}".',
            'I\'ll be away {d}, so fill the day with "{title}", no start or end time.',
            '"{title}" takes up my whole day {d}. Add it without times.',
            'Can you create a full-day event {d} called "{title}"?',
            'Put down "{title}" {d}. It lasts the whole day, no set hours.',
        ),
        "ko": (
            '{d} "{title}" 하루 종일로 등록해 줘.',
            '{d} 종일 "{title}" 넣어줘.',
            '{d}은 "{title}"이야. 하루 종일 일정으로 잡아줘.',
            '{d} 전체를 "{title}"로 막아줘.',
            '{d} "{title}" 일정 넣어 주세요. 시간 지정 없이 하루 종일이요.',
            '"{title}" 일정, {d} 아침부터 밤까지 종일로 잡아 줄래?',
            '{d} 하루 통째로 "{title}" 일정 잡아 주세요.',
            '{d} 하루 내내 "{title}" 일정으로 표시해 줘.',
        ),
    },
}
# Templates that say what another one says (what differs is the store or the user's answer).
SHARED: dict[str, str] = {
    "multi_attendee_one_busy": "multi_attendee", "delete_refused": "delete_request",
    "delete_same_title": "delete_request", "reschedule_refused": "reschedule", "conflict_free": "conflict_create",
    "create_over_series": "conflict_create",
}
PHRASINGS_PER_LANGUAGE = 8


def wordings_of(template: str, lang: str) -> tuple[str, ...]:
    """``template``'s eight wordings in ``lang`` (a template that shares another's, that one's)."""
    return WORDINGS[SHARED.get(template, template)][lang]


def say(template: str, lang: str, phrasing: int, **words: Any) -> str:
    """Wording ``phrasing`` of ``template`` in ``lang``, filled with the scenario's words."""
    return wordings_of(template, lang)[phrasing].format(**words)
