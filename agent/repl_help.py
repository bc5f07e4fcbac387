"""The REPL's /help text: its commands, with the words the domain's language takes for a day.

Apart from ``agent.repl`` because the text is the one part of the REPL a domain shapes (the day
words after /events, ``Language.day_words``); the REPL itself only prints it.
"""

from __future__ import annotations

import textwrap

from agent.language import ENGLISH, Language

HELP = """Commands:
  /new            start a fresh conversation (the calendar is kept)
  /reset          same as /new
  /tools          list the tools the model can call
{events}
  /week [DAY]     seven days from DAY (default today), with places and attendees
  /reminders      upcoming reminders (due ones are shown between messages)
  /sync           sync with your calendar server now, if one is set up (CalDAV)
  /help           this text
  /quit           leave (Ctrl-D or Ctrl-C at the prompt work too)
Anything else is sent to the assistant; Ctrl-C stops a reply."""


def help_text(language: Language = ENGLISH) -> str:
    """The REPL's help, with the day words the domain's language takes after /events."""
    events = textwrap.fill(f"events of a day, without the model: {language.day_words}", width=88,
                           initial_indent="  /events [DAY]   ", subsequent_indent=" " * 18, break_on_hyphens=False)
    return HELP.format(events=events)
