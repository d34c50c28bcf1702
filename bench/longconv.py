"""A synthetic long multi-session conversation with questions whose answer turns are known.

Two friends chat over many sessions (one date each). Life events are mentioned the way people
mention them: often in a short reply to the other's question ("We called him Max!"), with
relative dates ("last weekend"), pronouns, and words that differ from the question's. Filler
turns (reactions, small talk) compete with the answers. Deterministic for a seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, timedelta


@dataclass
class Turn:
    speaker: str
    text: str
    session: int
    when: date


# (event kind, statement templates, follow-up question by the friend, short-answer templates, questions)
EVENTS = [
    (
        "pet",
        ["We just adopted a {breed} puppy from the shelter!", "Big news, we brought home a little {breed} this week."],
        "Aww, what did you name {obj}?",
        ["We called him {name}!", "{name}! The kids picked it."],
        ["What is the name of {speaker}'s dog?", "What did {speaker} name the new puppy?"],
    ),
    (
        "class",
        [
            "I signed up for a {hobby} class at the community center.",
            "I started taking {hobby} lessons on Tuesday evenings.",
        ],
        "Oh fun, how is {obj} going?",
        ["Honestly harder than I expected, but I love it.", "Slow progress, my teacher is patient though."],
        ["What kind of class did {speaker} sign up for?", "Which lessons did {speaker} start taking?"],
    ),
    (
        "trip",
        ["We got back from {place} {rel}.", "I spent {rel} in {place} with my sister."],
        "How was {obj}? Anything memorable?",
        ["The food! We ate {food} every single day.", "We hiked a lot and tried {food}."],
        ["Where did {speaker} travel with family?", "What did {speaker} eat a lot of on the trip to {place}?"],
    ),
    (
        "job",
        [
            "I accepted an offer as a {role} at {company}.",
            "I'm switching jobs, starting as {role} at {company} next month.",
        ],
        "Congrats!! When do you start {obj}?",
        ["First day is {weekday}, a bit nervous.", "On {weekday}, right after the holidays."],
        ["What new job did {speaker} accept?", "Which company is {speaker} joining?"],
    ),
    (
        "purchase",
        ["I finally bought a {item} for the living room.", "We treated ourselves to a new {item}."],
        "Nice, what made you pick {obj}?",
        ["It was on sale and the color matches the rug.", "My back was killing me with the old one."],
        ["What did {speaker} buy for the home?", "Which furniture did {speaker} get recently?"],
    ),
    (
        "health",
        ["I sprained my ankle playing {sport} {rel}.", "I hurt my knee at {sport} practice {rel}."],
        "Ouch! Are you okay? What did the doctor say about {obj}?",
        ["Two weeks of rest and no {sport}.", "Physio twice a week, no running for a month."],
        ["How did {speaker} get injured?", "What sport was {speaker} playing when the injury happened?"],
    ),
    (
        "book",
        ["I'm reading {book} right now, can't put it down.", "Just finished {book}, what a ride."],
        "Who recommended {obj} to you?",
        ["My book club, we meet every other {weekday}.", "My coworker {friend} lent it to me."],
        ["Which book was {speaker} reading?", "Who lent {speaker} a book?"],
    ),
    (
        "volunteer",
        ["I volunteered at the {cause} fundraiser {rel}.", "We helped out at a {cause} charity run {rel}."],
        "That's so kind, how did {obj} turn out?",
        ["We raised almost {amount} dollars!", "Over {amount} dollars collected, I was amazed."],
        ["What cause did {speaker} volunteer for?", "How much money did the fundraiser {speaker} helped at raise?"],
    ),
    (
        "garden",
        ["My {plant} finally bloomed in the backyard.", "I planted {plant} along the fence {rel}."],
        "Pictures please! How long did {obj} take?",
        ["Almost three months of waiting.", "About six weeks, way faster than I thought."],
        ["What did {speaker} plant in the garden?", "What flowers bloomed in {speaker}'s backyard?"],
    ),
    (
        "concert",
        ["We saw {band} live at the stadium {rel}.", "I went to the {band} concert {rel}, front row!"],
        "No way! What was the best part of {obj}?",
        ["They played our wedding song as the encore.", "The drum solo, I still have goosebumps."],
        ["Which band did {speaker} see in concert?", "Where did {speaker} see {band} perform?"],
    ),
]
SLOTS = {
    "breed": ["beagle", "corgi", "labrador", "dachshund", "border collie", "husky"],
    "name": ["Max", "Biscuit", "Luna", "Pepper", "Oscar", "Maple", "Ziggy", "Nala"],
    "hobby": ["pottery", "salsa dancing", "watercolor painting", "Italian cooking", "woodworking", "photography"],
    "place": ["Lisbon", "Kyoto", "Vancouver", "Marrakech", "Reykjavik", "Buenos Aires", "Tuscany"],
    "food": ["grilled sardines", "ramen", "poutine", "tagine", "lamb soup", "empanadas", "fresh pasta"],
    "role": ["product designer", "data analyst", "nurse manager", "backend engineer", "project lead"],
    "company": ["Northwind", "Globex", "Initech", "Umbrella Health", "Stark Logistics", "Wayne Foods"],
    "weekday": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"],
    "item": ["sofa", "reading chair", "standing desk", "dining table", "bookshelf"],
    "sport": ["basketball", "soccer", "tennis", "volleyball"],
    "book": ["'The Silent Orchard'", "'Roads of Salt'", "'A Map of Small Hours'", "'The Glass Harbor'"],
    "friend": ["Priya", "Tom", "Jasmine", "Luis", "Greta"],
    "cause": ["animal shelter", "children's hospital", "food bank", "literacy"],
    "amount": ["2,000", "5,500", "800", "12,000", "3,200"],
    "plant": ["sunflowers", "lavender", "tulips", "peonies", "tomatoes"],
    "band": ["The Lumineers", "Coldplay", "Florence and the Machine", "Imagine Dragons"],
    "rel": ["last weekend", "yesterday", "last Friday", "two days ago", "over the weekend"],
}
FILLER = [
    "How was your week?",
    "Pretty busy, but good. You?",
    "Haha, same here.",
    "That's awesome!",
    "I totally get that.",
    "Tell me more!",
    "Oh wow.",
    "Sounds like a lot.",
    "Glad to hear it!",
    "Work has been crazy lately.",
    "I need a vacation honestly.",
    "The weather has been so nice.",
    "Did you catch the game?",
    "I've been sleeping badly this week.",
    "We should grab coffee soon.",
    "Miss our chats!",
    "Anyway, enough about me.",
    "That made my day.",
    "Lol, classic.",
    "Same, same.",
]
SPEAKERS = ("Caroline", "Melanie")


def _fill(template: str, values: dict[str, str]) -> str:
    return template.format(**values)


def generate(sessions: int = 20, seed: int = 7) -> tuple[list[Turn], list[tuple[str, int]]]:
    """One conversation: every (life event kind, speaker) happens once, one or two per session."""
    rng = random.Random(seed)
    turns: list[Turn] = []
    questions: list[tuple[str, int]] = []
    day = date(2023, 1, 8) + timedelta(days=rng.randint(0, 300))
    events = [(event, speaker) for event in EVENTS for speaker in SPEAKERS]
    rng.shuffle(events)
    per_session = [events[i::sessions] for i in range(sessions)]
    for session, todays in enumerate(per_session):
        day += timedelta(days=rng.randint(5, 20))

        def say(speaker: str, text: str, session: int = session, day: date = day) -> int:
            turns.append(Turn(speaker, text, session, day))
            return len(turns) - 1

        say(SPEAKERS[session % 2], rng.choice(["Hey! Long time no chat.", "Hi!! How are you?", "Hey you!"]))
        for (kind, statements, follow, answers, asks), speaker in todays:
            for _ in range(rng.randint(3, 8)):
                say(rng.choice(SPEAKERS), rng.choice(FILLER))
            friend = SPEAKERS[1 - SPEAKERS.index(speaker)]
            values = {k: rng.choice(v) for k, v in SLOTS.items()}
            values["speaker"] = speaker
            values["obj"] = rng.choice(["it", "that", "the whole thing"])
            statement = say(speaker, _fill(rng.choice(statements), values))
            say(friend, _fill(follow, values))
            answer = say(speaker, _fill(rng.choice(answers), values))
            first, second = asks
            for question, target in ((first, statement), (second, answer if _asks_detail(kind, second) else statement)):
                text = _fill(question, values)
                if rng.random() < 0.5:  # a time anchor, as people ask ("... in March 2023?")
                    text = text.rstrip("?") + f" in {day:%B %Y}?"
                questions.append((text, target))
        for _ in range(rng.randint(2, 6)):
            say(rng.choice(SPEAKERS), rng.choice(FILLER))
        say(rng.choice(SPEAKERS), rng.choice(["Talk soon!", "Gotta run, bye!", "Love you, bye!"]))
    return turns, questions


def generate_set(
    conversations: int = 10, sessions: int = 20, seed: int = 7
) -> list[tuple[list[Turn], list[tuple[str, int]]]]:
    """Several independent conversations (one store each), like public long-conversation benchmarks."""
    return [generate(sessions, seed * 1000 + i) for i in range(conversations)]


def _asks_detail(kind: str, question: str) -> bool:
    """Whether the second question is answered by the short reply rather than the statement."""
    return {
        "pet": "name" in question,
        "trip": "eat" in question,
        "volunteer": "much money" in question,
        "book": "lent" in question,
    }.get(kind, False)


def turn_text(
    turn: Turn,
    *,
    speaker: bool = True,
    date: bool = True,
    context: bool = False,
    previous: Turn | None = None,
    metadata: bool = False,
) -> str:
    """The memory text of one turn: optionally its session date, speaker and the turn it answers."""
    parts = []
    if context and previous is not None:
        parts.append(f"({previous.speaker}: {previous.text})")
    if date:
        parts.append(f"[{turn.when:%d %B %Y}]")
    parts.append(f"{turn.speaker}: {turn.text}" if speaker else turn.text)
    return " ".join(parts)
