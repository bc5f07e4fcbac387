"""The calendar templates' wordings per split: dev and test each hold three per template and
language, none a train wording or a drill's (the wording, time and boundary drills), and every generated opening is the wording its
variant names.

Openings are reduced to their wording by putting placeholders back where the scenario's own words
(title, day, times, people, duration) stand, with the wording drill's ``said_words``, so the check
runs on what the generator actually said, not only on the wording table.
"""

from __future__ import annotations

import re
from collections import defaultdict

from tools.calendar.lab.boundary_drill import FRAMES as BOUNDARY_DRILL_FRAMES
from tools.calendar.lab.rewritten import load_rewrites
from tools.calendar.lab.scenarios import PHRASINGS_OF_SPLIT, SPLIT_OF_PHRASING, TEMPLATES, generate
from tools.calendar.lab.time_drill import _FRAMES as TIME_DRILL_FRAMES
from tools.calendar.lab.time_probe import load_openings
from tools.calendar.lab.wording_drill import FRAMES as WORDING_DRILL_FRAMES
from tools.calendar.lab.wording_drill import said_words
from tools.calendar.lab.wordings import PHRASINGS_PER_LANGUAGE, WORDINGS, wordings_of

LANGUAGES = ("en", "ko")
HELD = ("dev", "test")
GENERATED = generate("all")  # the default: 80 per core template, 40 per other
ADDED = range(4, PHRASINGS_PER_LANGUAGE)  # the wordings added when the held splits got three each


def frame_of(scenario) -> str:  # noqa: ANN001 - a Scenario
    every_wording = " ".join(wordings_of(scenario.template, scenario.language))
    words = {"{" + name + "}": said for name, said in said_words(scenario, every_wording).items() if said}
    opening = scenario.opening
    for placeholder, said in sorted(words.items(), key=lambda kv: -len(kv[1])):  # longest first
        opening = opening.replace(said, placeholder)
    return opening


def normal(text: str) -> str:
    """Lower case without spaces or punctuation: "넣어 줘." and "넣어줘" are one wording."""
    return re.sub(r"[\W_]+", "", text.lower())


def five_word_runs(wording: str) -> set[tuple[str, ...]]:
    """Runs of five words and placeholders, three or more of them words."""
    words = re.findall(r"\{\w+\}|[\w']+", wording.lower())
    runs = (tuple(words[i:i + 5]) for i in range(len(words) - 4))
    return {run for run in runs if sum(not w.startswith("{") for w in run) >= 3}


def drill_wordings(template: str, lang: str) -> tuple[str, ...]:
    return (*WORDING_DRILL_FRAMES[template][lang], *TIME_DRILL_FRAMES[lang], *BOUNDARY_DRILL_FRAMES[lang])


def test_every_generated_opening_is_the_wording_its_variant_names_and_its_split_holds() -> None:
    for s in GENERATED:
        template, key = s.variant.split("/")
        phrasing = int(key[2:])
        assert (template, key[:2]) == (s.template, s.language)
        assert SPLIT_OF_PHRASING[phrasing] == s.split, s.id
        assert frame_of(s) == wordings_of(s.template, s.language)[phrasing], (s.id, s.opening)


def test_dev_and_test_each_say_every_template_in_three_wordings_per_language_none_of_trains() -> None:
    said: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for s in GENERATED:
        said[s.split, s.template, s.language].add(normal(frame_of(s)))
    for template in TEMPLATES:
        for lang in LANGUAGES:
            train, dev, test = (said[split, template, lang] for split in ("train", "dev", "test"))
            assert len(train) == 2 and len(dev) == 3 and len(test) == 3, (template, lang)
            assert not dev & test and not (dev | test) & train, (template, lang)


def test_no_held_wording_is_a_train_or_drill_wording_nor_shares_five_words_in_a_row_with_one() -> None:
    """Not the same sentence up to spaces and punctuation, nor one with a word changed."""
    for template in TEMPLATES:
        for lang in LANGUAGES:
            wordings = wordings_of(template, lang)
            seen = [wordings[p] for p in PHRASINGS_OF_SPLIT["train"]] + list(drill_wordings(template, lang))
            for split in HELD:
                others = seen + [wordings[p] for p in PHRASINGS_OF_SPLIT[HELD[split == "dev"]]]
                for p in PHRASINGS_OF_SPLIT[split]:
                    assert normal(wordings[p]) not in {normal(o) for o in others}, (template, lang, p)
                    for other in others:
                        assert not five_word_runs(wordings[p]) & five_word_runs(other), (template, lang, p, other)


def test_no_held_opening_is_a_probe_or_hand_rewritten_opening() -> None:
    """The probe and the rewritten openings are test data of their own: no generated dev or test
    opening says what one of them says."""
    _, probe = load_openings()
    theirs = {normal(o.opening) for o in probe} | {normal(r.rewritten) for r in load_rewrites().values()}
    assert not {normal(s.opening) for s in GENERATED if s.split in HELD} & theirs


def test_every_template_has_eight_wordings_per_language_each_filled_by_its_own_placeholders() -> None:
    for family, by_lang in WORDINGS.items():
        assert set(by_lang) == set(LANGUAGES)
        for lang, wordings in by_lang.items():
            assert len(wordings) == PHRASINGS_PER_LANGUAGE == len({normal(w) for w in wordings}), (family, lang)
            fields = {frozenset(re.findall(r"\{(\w+)\}", w)) for w in wordings}
            assert len(fields) == 1 or family == "no_tool", (family, lang, fields)  # every wording says it all


# Korean particles whose form follows the last syllable (은/는, 이/가, 을/를, 과/와, 으로/로, 이랑/랑,
# 이야/야): wrong after some day words, titles, names and times ("모레은", "요가 수업로", "3시 반로").
_KO_VARYING = re.compile(r'\{(?:d|a|b|t)\}|\{title\}"')
_KO_PARTICLE = re.compile(r"(?:은|는|이|가|을|를|과|와|으로|로|이랑|랑|야|이야|예요|이에요)(?=[\s,.?!)]|$)")
# An English day said "on December 9" reads wrong after "for" or "of" and first in a sentence;
# after "from", "after", "every" the date notes leave it alone (tools.calendar.date_notes).
_EN_DAY_MISPLACED = re.compile(r"\b(?:for|of|from|after|before|every)\s+\{d\}|(?:^|[.?!]\s+)\{d\}")


def test_the_added_wordings_read_right_whatever_words_fill_them() -> None:
    for family, by_lang in WORDINGS.items():
        for p in ADDED:
            en, ko = by_lang["en"][p], by_lang["ko"][p]
            assert not _EN_DAY_MISPLACED.search(en), (family, p, en)
            for found in _KO_VARYING.finditer(ko):
                assert not _KO_PARTICLE.match(ko, found.end()), (family, p, ko)
