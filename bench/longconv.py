"""Synthetic long multi-session conversations with questions whose answer turns are known.

`generate` (set B in bench/retrieval.py) paraphrases; `generate_grounded` (set A, further down)
asks in the words the speaker used, as public long-conversation benchmarks mostly do.

Two friends chat over many sessions (one date each). Life events are mentioned the way people
mention them: often in a short reply to the other's question ("We called him Max!"), with
relative dates ("last weekend"), pronouns, and words that differ from the question's. Filler
turns (reactions, small talk) compete with the answers. Deterministic for a seed.
"""

from __future__ import annotations

import random
import re
from collections import Counter
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


# --- A second style: questions that name what the answer turn says -------------------------------
# Public long-conversation benchmarks (LoCoMo-like) mostly ask about an event in the words the
# speaker used ("When did Caroline go to the LGBTQ support group?" <- "I went to a LGBTQ support
# group yesterday and it was so powerful."), while the same topics come back in later sessions
# (call-backs, the friend's questions, reactions), so the key noun alone does not single the turn
# out. Both speakers live through events of the same kinds (both go to a concert), so the name in
# the question matters. Turns address the other speaker by name, as people do in chat.
KINDS: list[dict] = [
    {
        "slots": {
            "group": ["LGBTQ", "grief", "new parents", "cancer survivors", "veterans"],
            "story": ["coming out to family", "losing a parent", "sleepless nights", "long recoveries"],
        },
        "say": [
            "I went to a {group} support group {rel} and it was so powerful.",
            "{Rel} I finally went to the {group} support group, I was nervous but it felt right.",
        ],
        "ask": [
            "Wow, that's cool, {speaker}! What happened that was so special?",
            "That's brave of you! How did the group make you feel?",
        ],
        "detail": [
            "Hearing the other members' stories about {story} gave me so much courage.",
            "People shared stories about {story}, I felt accepted for the first time in ages.",
        ],
        "callback": [
            "The support group has really helped me open up, {friend}.",
            "I'm going back to the {group} group next week, it's become my safe place.",
        ],
        "questions": [
            ("When did {speaker} go to the {group} support group?", "say"),
            ("What stories did {speaker} hear at the support group?", "detail"),
        ],
    },
    {
        "slots": {
            "subject": ["sunrise over the lake", "field of poppies", "portrait of an old fisherman", "stormy sea"],
            "medium": ["watercolors", "acrylics", "oil pastels", "gouache"],
            "inspo": ["a trip to the coast", "an old photo album", "a dream I had", "a museum visit"],
        },
        "say": [
            "I painted a {subject} {rel}, it's my favorite piece so far.",
            "Guess what, I finished painting a {subject} {rel}!",
        ],
        "ask": ["That sounds beautiful, {speaker}! What inspired it?", "Ooh, can I see it? What inspired you?"],
        "detail": [
            "It came from {inspo}. I used {medium} this time and loved how it turned out.",
            "Honestly {inspo}. I tried {medium}, which was new for me.",
        ],
        "callback": [
            "Painting keeps me calm when life gets busy, {friend}.",
            "I hung the {subject} painting in the hallway, everyone comments on it.",
        ],
        "questions": [
            ("When did {speaker} paint a {subject}?", "say"),
            ("What did {speaker} use to paint the {subject}?", "detail"),
        ],
    },
    {
        "slots": {
            "park": ["Yosemite", "the Smoky Mountains", "Lake Tahoe", "Big Sur", "Zion"],
            "animal": ["a family of deer", "a black bear", "bald eagles", "a moose"],
        },
        "say": ["We went camping at {park} {rel} with the kids.", "{Rel} we took the family camping at {park}."],
        "ask": ["Fun! What did you all get up to?", "I love that, {speaker}! How was the camping trip?"],
        "detail": [
            "We roasted marshmallows every night and saw {animal} near the lake!",
            "The best part was spotting {animal} on a morning hike.",
        ],
        "callback": [
            "The kids keep asking when we go camping again, {friend}.",
            "Camping at {park} reminded me how much I need nature.",
        ],
        "questions": [
            ("Where did {speaker} go camping with the kids?", "say"),
            ("What animals did {speaker}'s family see while camping?", "detail"),
        ],
    },
    {
        "slots": {
            "race": ["5K", "half marathon", "10K", "relay race"],
            "cause": ["mental health", "cancer research", "the children's hospital", "clean water"],
            "amount": ["2,000", "5,500", "800", "12,000", "3,200"],
            "relative": ["cousin", "uncle", "best friend", "grandfather"],
        },
        "say": ["I ran a charity {race} for {cause} {rel}!", "{Rel} I did a {race} to raise money for {cause}."],
        "ask": ["Amazing, {speaker}! Why that cause?", "That's awesome! What made you pick that one?"],
        "detail": [
            "My {relative} went through it, so it felt personal. We raised {amount} dollars in the end.",
            "It means a lot because of my {relative}. Our team collected {amount} dollars!",
        ],
        "callback": [
            "I've been training again, running clears my head, {friend}.",
            "My legs still remember that {race}, haha.",
        ],
        "questions": [
            ("When did {speaker} run the charity {race}?", "say"),
            ("How much money did {speaker}'s charity {race} raise?", "detail"),
        ],
    },
    {
        "slots": {
            "breed": ["beagle", "corgi", "labrador", "dachshund", "border collie", "tabby cat", "siamese cat"],
            "petname": ["Max", "Biscuit", "Luna", "Pepper", "Oscar", "Maple", "Ziggy", "Nala"],
        },
        "say": ["We adopted a {breed} from the shelter {rel}!", "{Rel} we brought home a {breed} from the rescue."],
        "ask": ["Aww, {speaker}! What did you name it?", "So cute!! What's the name?"],
        "detail": [
            "{petname}! The kids picked it and it already sleeps on my feet.",
            "We went with {petname}, it just suited the little face.",
        ],
        "callback": [
            "{petname} chewed through another shoe, {friend}, I can't even be mad.",
            "Walking {petname} every morning has been so good for me.",
        ],
        "questions": [
            ("What kind of pet did {speaker} adopt?", "say"),
            ("What is the name of {speaker}'s pet?", "detail"),
        ],
    },
    {
        "slots": {
            "role": ["product designer", "data analyst", "nurse manager", "school counselor", "project lead"],
            "company": ["Northwind", "Globex", "Initech", "Umbrella Health", "Stark Logistics"],
            "project": [
                "a new patient app",
                "their recycling program",
                "the city bus schedules",
                "a tutoring platform",
            ],
        },
        "say": ["I got a job offer as a {role} at {company}!", "{Rel} {company} offered me the {role} position!"],
        "ask": ["Congrats, {speaker}!! When do you start?", "That's huge! What will you be doing?"],
        "detail": [
            "Next month. I'll be working on {project}, which is exactly what I wanted.",
            "I'm going to lead work on {project}, a bit scary but exciting.",
        ],
        "callback": [
            "Work at {company} is intense but I'm learning so much, {friend}.",
            "My new team is great, lots of late nights though.",
        ],
        "questions": [
            ("What job offer did {speaker} get?", "say"),
            ("What will {speaker} be working on at {company}?", "detail"),
        ],
    },
    {
        "slots": {
            "hobby": ["pottery", "salsa dancing", "Italian cooking", "woodworking", "photography"],
            "teacher": ["Rosa", "Mr. Okafor", "Hannah", "Diego", "Ms. Lindqvist"],
        },
        "say": [
            "I signed up for a {hobby} class at the community center.",
            "{Rel} I took my first {hobby} class, finally!",
        ],
        "ask": ["Oh fun, {speaker}! How's it going so far?", "Nice! Is the class any good?"],
        "detail": [
            "Harder than I expected, but our teacher {teacher} is super patient.",
            "I love it. {teacher}, the teacher, makes everyone feel welcome.",
        ],
        "callback": [
            "Class was fun again this week, {friend}, I'm slowly improving.",
            "I made a total mess in {hobby} class yesterday, haha.",
        ],
        "questions": [
            ("What class did {speaker} sign up for?", "say"),
            ("Who teaches {speaker}'s {hobby} class?", "detail"),
        ],
    },
    {
        "slots": {
            "place": ["Lisbon", "Kyoto", "Vancouver", "Marrakech", "Reykjavik", "Buenos Aires"],
            "food": ["grilled sardines", "ramen", "poutine", "tagine", "lamb soup", "empanadas"],
            "sight": ["an old castle", "the hot springs", "a night market", "a glacier"],
        },
        "say": ["I just got back from {place}, what a trip!", "We spent a week in {place} with my sister."],
        "ask": ["Jealous! How was it, {speaker}?", "Tell me everything! What was the highlight?"],
        "detail": [
            "We ate {food} every day and visited {sight}, unforgettable.",
            "The highlight was {sight}, and the {food}, oh my.",
        ],
        "callback": ["I'm still dreaming about {place}, {friend}.", "I miss traveling so much, honestly."],
        "questions": [
            ("When did {speaker} travel to {place}?", "say"),
            ("What food did {speaker} eat every day on the trip?", "detail"),
        ],
    },
    {
        "slots": {
            "band": ["The Lumineers", "Coldplay", "Florence and the Machine", "Imagine Dragons", "Adele"],
            "song": ["their biggest hit", "a slow acoustic song", "our wedding song", "a brand new song"],
        },
        "say": ["I saw {band} live {rel}, front row!", "{Rel} we went to the {band} concert!"],
        "ask": ["No way, {speaker}! What was the best part?", "Jealous!! How was the show?"],
        "detail": ["They closed with {song} and I cried a little.", "Hearing {song} live gave me goosebumps."],
        "callback": ["I've had {band} on repeat all week, {friend}.", "Music really gets me through tough days."],
        "questions": [
            ("Which band did {speaker} see live?", "say"),
            ("What song made {speaker} cry at the concert?", "detail"),
        ],
    },
    {
        "slots": {
            "book": ["'The Silent Orchard'", "'Roads of Salt'", "'A Map of Small Hours'", "'The Glass Harbor'"],
            "plot": [
                "a girl who finds her birth mother",
                "a lighthouse keeper during a war",
                "two sisters rebuilding a farm",
                "a chef who loses her sense of taste",
            ],
        },
        "say": ["I'm reading {book} right now, can't put it down.", "I finished {book} {rel}, what a ride."],
        "ask": ["Ooh, what's it about, {speaker}?", "I need a new book! Is it good?"],
        "detail": ["It's about {plot}. My book club picked it.", "It follows {plot}, really moving."],
        "callback": ["Reading before bed is my little ritual now, {friend}.", "Books have been my escape lately."],
        "questions": [
            ("What book was {speaker} reading?", "say"),
            ("What is the book {speaker} read about?", "detail"),
        ],
    },
    {
        "slots": {
            "org": ["animal shelter", "food bank", "children's hospital", "library"],
            "task": ["sorting donations", "reading to kids", "walking the dogs", "running the front desk"],
        },
        "say": ["I've been volunteering at the {org} on weekends.", "{Rel} I started volunteering at the {org}."],
        "ask": ["That's so kind, {speaker}. What do you do there?", "Love that! How did you get into it?"],
        "detail": ["Mostly {task}, it's the best part of my week.", "I help with {task}, it keeps me grounded."],
        "callback": ["Giving back makes me feel so connected, {friend}.", "The {org} needs more volunteers again."],
        "questions": [("Where does {speaker} volunteer?", "say"), ("What does {speaker} do as a volunteer?", "detail")],
    },
    {
        "slots": {
            "plant": ["sunflowers", "lavender", "tulips", "peonies", "tomatoes"],
            "neighbor": ["Mrs. Patel", "old Mr. Burke", "Janet next door", "our neighbor Kofi"],
        },
        "say": ["I planted {plant} in the backyard {rel}.", "{Rel} my {plant} finally bloomed in the garden!"],
        "ask": ["Pictures please, {speaker}! Was it hard?", "So pretty! Who taught you all that?"],
        "detail": ["{neighbor} gave me tips, it took weeks of patience.", "I asked {neighbor} for advice, lifesaver."],
        "callback": ["Gardening is so peaceful in the mornings, {friend}.", "Slugs ate half my garden, ugh."],
        "questions": [
            ("What did {speaker} plant in the backyard?", "say"),
            ("Who gave {speaker} gardening advice?", "detail"),
        ],
    },
    {
        "slots": {
            "bodypart": ["ankle", "knee", "wrist", "shoulder"],
            "sport": ["basketball", "soccer", "tennis", "volleyball"],
            "rest": ["two weeks", "a month", "six weeks"],
        },
        "say": ["I hurt my {bodypart} playing {sport} {rel}.", "{Rel} I twisted my {bodypart} at {sport} practice."],
        "ask": ["Oh no, {speaker}! Are you okay?", "Ouch! What did the doctor say?"],
        "detail": ["The doctor said {rest} of rest and physio twice a week.", "No sports for {rest}, doctor's orders."],
        "callback": ["My {bodypart} is feeling better, {friend}, slowly.", "I miss playing so much."],
        "questions": [
            ("How did {speaker} hurt their {bodypart}?", "say"),
            ("How long did the doctor tell {speaker} to rest?", "detail"),
        ],
    },
    {
        "slots": {
            "field": ["counseling", "nursing", "teaching", "social work"],
            "aim": [
                "support people going through what I went through",
                "help kids who feel alone",
                "make a difference for families like mine",
            ],
        },
        "say": ["I'm keen on {field}, I'd love to {aim}.", "I've been thinking about a career in {field}."],
        "ask": ["You'd be so good at that, {speaker}!", "That suits you! What got you thinking about it?"],
        "detail": ["My own experience, honestly. I want to {aim}.", "I looked into certification programs already."],
        "callback": ["Still researching {field} programs, {friend}.", "Thinking about my future a lot lately."],
        "questions": [
            ("What career is {speaker} considering?", "say"),
            ("Why does {speaker} want to go into {field}?", "detail"),
        ],
    },
    {
        "slots": {
            "relative": ["brother", "sister", "cousin", "best friend"],
            "venue": ["a vineyard", "the beach", "an old barn", "a botanical garden"],
        },
        "say": ["My {relative} got married {rel}!", "{Rel} was my {relative}'s wedding, so emotional."],
        "ask": ["Congrats to them, {speaker}! Where was it?", "Aww! How was the ceremony?"],
        "detail": [
            "At {venue}, and it rained for exactly five minutes during the vows.",
            "It was at {venue}, so beautiful, I danced all night.",
        ],
        "callback": [
            "Weddings always make me so sentimental, {friend}.",
            "I'm still recovering from all that dancing.",
        ],
        "questions": [
            ("Whose wedding did {speaker} attend?", "say"),
            ("Where was the wedding of {speaker}'s {relative}?", "detail"),
        ],
    },
    {
        "slots": {
            "instrument": ["guitar", "violin", "piano", "ukulele"],
            "tune": ["'Clair de Lune'", "'Here Comes the Sun'", "'Hallelujah'", "a lullaby for my son"],
        },
        "say": ["I've been learning to play the {instrument}.", "{Rel} I started {instrument} lessons!"],
        "ask": ["So cool, {speaker}! Can you play a whole song yet?", "Nice! What are you practicing?"],
        "detail": ["I can play {tune} from start to finish now!", "Working on {tune}, my fingers hurt, haha."],
        "callback": ["Practicing every evening, {friend}, it calms me.", "Music is such good therapy."],
        "questions": [("What instrument is {speaker} learning?", "say"), ("What song can {speaker} play?", "detail")],
    },
    {
        "slots": {
            "city": ["Denver", "Portland", "Austin", "Boston", "Seattle"],
            "reason": ["to be closer to my mom", "because of the schools", "for my partner's job"],
        },
        "say": ["We're moving to {city} next month!", "Big news: we decided to move to {city}."],
        "ask": ["Whoa, {speaker}! Why the move?", "That's a big change! What made you decide?"],
        "detail": ["Mostly {reason}, it just makes sense right now.", "We're doing it {reason}."],
        "callback": ["Boxes everywhere, {friend}, moving is chaos.", "Still unpacking, send help."],
        "questions": [("Where is {speaker} moving to?", "say"), ("Why is {speaker} moving?", "detail")],
    },
    {
        "slots": {
            "dish": ["a lemon cake", "banana bread", "an apple pie", "chocolate chip cookies"],
            "occasion": ["school bake sale", "church potluck", "neighborhood picnic", "office party"],
        },
        "say": ["I baked {dish} for the {occasion} {rel}.", "{Rel} I made {dish} for the {occasion}."],
        "ask": ["Yum, {speaker}! Did people like it?", "Save me a slice! How did it go?"],
        "detail": ["It sold out in ten minutes, I was so proud.", "Gone in minutes, someone asked for the recipe."],
        "callback": ["Baking is my stress relief, {friend}.", "I burnt the cookies again, haha."],
        "questions": [
            ("What did {speaker} bake for the {occasion}?", "say"),
            ("How did {speaker}'s baking go over at the {occasion}?", "detail"),
        ],
    },
]
TALK = [
    "Hey {friend}! Good to see you! How have you been?",
    "Thanks, {friend}! That means a lot to me.",
    "I'm swamped with work and the kids lately, but hanging in there.",
    "Wow, that's so inspiring, {friend}! I'm really proud of you.",
    "You always know how to make me smile.",
    "I totally get that, some weeks are just a lot.",
    "That's awesome! Tell me more!",
    "Haha, same here, honestly.",
    "It's been a busy week, but a good one.",
    "I've been trying to take more time for myself lately.",
    "Family has been my rock through all of this.",
    "I'm so glad we keep in touch, {friend}.",
    "Take care of yourself, okay?",
    "That sounds like a lot, but you've got this.",
    "I love hearing about your life, {friend}.",
    "Life has been a rollercoaster lately.",
    "The weather has been so nice, we spent the whole day outside.",
    "I've been sleeping badly this week, too much on my mind.",
    "Thanks for always being there for me.",
    "It's the little things that make me happy these days.",
]
TAILS = [
    "It was so powerful.",
    "I feel really lucky, honestly.",
    "It made my whole week.",
    "I didn't expect to get so emotional about it.",
    "The kids were thrilled too.",
    "Still smiling about it.",
    "It reminded me what matters.",
    "I needed that so much.",
    "My partner thinks I'm a bit obsessed, haha.",
    "Life feels a little lighter lately.",
    "I'm so grateful for moments like that.",
    "It was a lot, in a good way.",
]
NAMES = [
    ("Caroline", "Melanie"),
    ("Jon", "Gina"),
    ("Audrey", "Andrew"),
    ("Joanna", "Nate"),
    ("Tim", "Priya"),
    ("Calvin", "Dave"),
    ("Evan", "Sam"),
    ("Deborah", "Jolene"),
    ("Maria", "John"),
    ("Rosa", "Kenji"),
]
NAME_SHARE = 0.35
RELATIVE = ["yesterday", "last weekend", "last Friday", "two days ago", "last week", "over the weekend"]


def generate_grounded(
    sessions: int = 20, seed: int = 7, events_per_speaker: int = 12
) -> tuple[list[Turn], list[tuple[str, int]]]:
    """One conversation in the public benchmarks' style (see KINDS); questions name the event."""
    rng = random.Random(seed)
    speakers = NAMES[seed % len(NAMES)]
    turns: list[Turn] = []
    questions: list[tuple[str, int]] = []
    happened: list[tuple[dict, str, dict[str, str]]] = []
    events = [(kind, s) for s in speakers for kind in rng.sample(KINDS, events_per_speaker)]
    rng.shuffle(events)
    per_session = [events[i::sessions] for i in range(sessions)]
    day = date(2023, 1, 8) + timedelta(days=rng.randint(0, 300))
    for session, todays in enumerate(per_session):
        day += timedelta(days=rng.randint(5, 20))

        def say(
            speaker: str,
            template: str,
            values: dict[str, str] | None = None,
            tail: bool = False,
            session: int = session,
            day: date = day,
        ) -> int:
            friend = speakers[1 - speakers.index(speaker)]
            if rng.random() > NAME_SHARE:  # people name each other in some turns, not in all
                template = re.sub(r", \{(friend|speaker)\}", "", template)
            if tail and rng.random() < 0.6:
                template += " " + rng.choice(TAILS)
            text = template.format(**{"speaker": speaker, **(values or {}), "friend": friend})
            turns.append(Turn(speaker, text[0].upper() + text[1:], session, day))
            return len(turns) - 1

        def chat(count: int) -> None:
            for _ in range(count):
                if happened and rng.random() < 0.35:  # a call-back to an earlier event
                    kind, who, values = rng.choice(happened)
                    say(who, rng.choice(kind["callback"]), values, tail=True)
                else:
                    say(rng.choice(speakers), " ".join(rng.sample(TALK[1:], rng.randint(1, 2))))

        say(speakers[session % 2], rng.choice(TALK[:1]))
        for kind, speaker in todays:
            chat(rng.randint(2, 5))
            values = {k: rng.choice(v) for k, v in kind["slots"].items()}
            values["rel"] = rng.choice(RELATIVE)
            values["Rel"] = values["rel"][0].upper() + values["rel"][1:]
            values["speaker"] = speaker  # the event's owner, also in the friend's reply ("Congrats, {speaker}!")
            friend = speakers[1 - speakers.index(speaker)]
            at = {"say": say(speaker, rng.choice(kind["say"]), values, tail=True)}
            say(friend, rng.choice(kind["ask"]), values)
            at["detail"] = say(speaker, rng.choice(kind["detail"]), values, tail=True)
            say(friend, rng.choice(TALK[1:]))
            happened.append((kind, speaker, values))
            for question, target in kind["questions"]:
                questions.append((question.format(**values), at[target]))
        chat(rng.randint(2, 5))
    return turns, questions


def generate_grounded_set(
    conversations: int = 10, sessions: int = 20, seed: int = 7
) -> list[tuple[list[Turn], list[tuple[str, int]]]]:
    return [generate_grounded(sessions, seed * 1000 + i) for i in range(conversations)]


# --- A third, harder style (set C): what public long-conversation benchmarks measure, at their size ---------
# The grounded set above overestimates: ~250 turns, two speakers, every event kind happens once per
# speaker. Here a conversation has ~750 turns over 32 sessions; each main speaker lives through some
# kinds twice (two trips, two concerts: the question's details pick one); friends from outside join
# some sessions and tell their own events of the same kinds; topics come back in later sessions; and a
# third of the questions paraphrase (no slot word of the answer turn).
GUESTS = ["Aisha", "Bruno", "Chloe", "Dmitri", "Elena", "Farid", "Hana", "Igor", "Julia", "Kofi", "Lena", "Marco"]
PARAPHRASE = {
    "group": "What kind of meeting for people in a similar situation did {speaker} attend?",
    "subject": "What did {speaker}'s recent artwork show?",
    "park": "Which outdoor spot did {speaker}'s family sleep in tents at?",
    "race": "What sort of run did {speaker} take part in for a good cause?",
    "breed": "What animal joined {speaker}'s household?",
    "role": "What position was {speaker} offered?",
    "hobby": "What course did {speaker} enrol in at the local center?",
    "place": "Which destination did {speaker} return from?",
    "band": "Which musicians did {speaker} watch perform?",
    "book": "Which novel could {speaker} not stop reading?",
    "org": "Where does {speaker} give time for free?",
    "plant": "What is growing in {speaker}'s garden?",
    "bodypart": "Which part of {speaker}'s body got injured?",
    "field": "Which profession is {speaker} thinking of switching to?",
    "relative": "Which family member of {speaker} tied the knot?",
    "instrument": "What is {speaker} practicing musically?",
    "city": "Where is {speaker}'s household relocating?",
    "dish": "What treat did {speaker} make for an event?",
}


def generate_hard(
    sessions: int = 32, seed: int = 7, kinds_per_speaker: int = 12, repeats: int = 4
) -> tuple[list[Turn], list[tuple[str, int]]]:
    """One long conversation (set C): two main speakers, guests in some sessions, repeated event kinds."""
    rng = random.Random(seed)
    speakers = NAMES[seed % len(NAMES)]
    guests = rng.sample(GUESTS, 4)
    turns: list[Turn] = []
    questions: list[tuple[str, int]] = []
    happened: list[tuple[dict, str, dict[str, str]]] = []
    events: list[tuple[dict, str]] = []
    for s in speakers:
        chosen = rng.sample(KINDS, kinds_per_speaker)
        events += [(kind, s) for kind in chosen + rng.sample(chosen, repeats)]
    events += [(kind, g) for g in guests for kind in rng.sample(KINDS, 3)]
    rng.shuffle(events)
    per_session = [events[i::sessions] for i in range(sessions)]
    day = date(2023, 1, 8) + timedelta(days=rng.randint(0, 300))
    for session, todays in enumerate(per_session):
        day += timedelta(days=rng.randint(4, 15))
        present = list(speakers) + [who for _, who in todays if who not in speakers]

        def say(
            speaker: str,
            template: str,
            values: dict[str, str] | None = None,
            tail: bool = False,
            session: int = session,
            day: date = day,
            present: list[str] = present,
        ) -> int:
            friend = rng.choice([p for p in present if p != speaker])
            if rng.random() > NAME_SHARE:
                template = re.sub(r", \{(friend|speaker)\}", "", template)
            if tail and rng.random() < 0.6:
                template += " " + rng.choice(TAILS)
            text = template.format(**{"speaker": speaker, **(values or {}), "friend": friend})
            turns.append(Turn(speaker, text[0].upper() + text[1:], session, day))
            return len(turns) - 1

        def chat(count: int, present: list[str] = present) -> None:
            for _ in range(count):
                if happened and rng.random() < 0.45:  # a call-back, by its owner or someone else
                    kind, who, values = rng.choice(happened)
                    say(
                        who if rng.random() < 0.7 else rng.choice(present),
                        rng.choice(kind["callback"]),
                        {**values, "speaker": who},
                        tail=True,
                    )
                else:
                    say(rng.choice(present), " ".join(rng.sample(TALK[1:], rng.randint(1, 2))))

        say(present[session % len(present)], rng.choice(TALK[:1]))
        for kind, speaker in todays:
            chat(rng.randint(3, 8))
            values = {k: rng.choice(v) for k, v in kind["slots"].items()}
            values["rel"] = rng.choice(RELATIVE)
            values["Rel"] = values["rel"][0].upper() + values["rel"][1:]
            values["speaker"] = speaker
            asker = rng.choice([p for p in present if p != speaker])
            at = {"say": say(speaker, rng.choice(kind["say"]), values, tail=True)}
            say(asker, rng.choice(kind["ask"]), values)
            at["detail"] = say(speaker, rng.choice(kind["detail"]), values, tail=True)
            say(rng.choice([p for p in present if p != speaker]), rng.choice(TALK[1:]))
            happened.append((kind, speaker, values))
            for question, target in kind["questions"]:
                questions.append((question.format(**values), at[target]))
            slot = next(iter(kind["slots"]))
            questions.append((PARAPHRASE[slot].format(**values), at["say"]))
        chat(rng.randint(3, 8))
    # A question asked of two events (the same kind twice, "What book was Jon reading?") has two answers:
    # leave it out; the ones naming a detail of one event stay.
    asked = Counter(question for question, _ in questions)
    return turns, [(question, turn) for question, turn in questions if asked[question] == 1]


def generate_hard_set(
    conversations: int = 10, sessions: int = 32, seed: int = 7
) -> list[tuple[list[Turn], list[tuple[str, int]]]]:
    return [generate_hard(sessions, seed * 1000 + i) for i in range(conversations)]


# --- A fourth style (set D): shaped like LoCoMo, to predict what it measures ------------------------------
# Set C stays easier than the held-out public benchmark (LoCoMo, 10 conversations, 1,536 questions: hybrid
# R@5 0.72 with chat metadata, 0.60 with the speaker written into the text). What real conversations
# have and C lacked: two speakers and ~300 turns over ~25 sessions, but the same kinds of event again and
# again for both of them (several trips, several pets, the same hobby in many sessions), the friend's
# reaction repeating the key word of the news, questions of four kinds in the benchmark's proportions
# (single-hop 55 %, temporal 21 %, multi-hop 18 %, open-domain 6 %; adversarial ones have no answer in
# the retrieval figures), multi-hop answers spread over sessions (each evidence turn counts for its share),
# open-domain questions to be inferred from a turn that shares no word with them, and the answer often in
# the reply to the friend's question rather than in the news itself. Questions name the speaker; turns say "I".
TEMPORAL = {
    "group": "When did {speaker} go to the {group} support group?",
    "subject": "When did {speaker} paint the {subject}?",
    "park": "When did {speaker} go camping at {park}?",
    "race": "When did {speaker} run the charity {race}?",
    "breed": "When did {speaker} adopt the {breed}?",
    "role": "When did {speaker} get the job offer from {company}?",
    "hobby": "When did {speaker} start the {hobby} class?",
    "place": "When did {speaker} go to {place}?",
    "band": "When did {speaker} see {band} live?",
    "book": "When did {speaker} read {book}?",
    "org": "When did {speaker} start volunteering at the {org}?",
    "plant": "When did {speaker} plant the {plant}?",
    "bodypart": "When did {speaker} hurt their {bodypart}?",
    "field": "When did {speaker} start thinking about a career in {field}?",
    "relative": "When did {speaker}'s {relative} get married?",
    "instrument": "When did {speaker} start learning the {instrument}?",
    "city": "When did {speaker} decide to move to {city}?",
    "dish": "When did {speaker} bake {dish} for the {occasion}?",
}
OPEN_DOMAIN = {
    "group": "Would {speaker} be open to sharing personal struggles with strangers?",
    "subject": "Would {speaker} enjoy a visit to an art museum?",
    "park": "Is {speaker}'s family likely to enjoy the outdoors?",
    "race": "Does {speaker} care about fitness and good causes?",
    "breed": "Would {speaker} be considered an animal lover?",
    "role": "Is {speaker} ambitious about their career?",
    "hobby": "Does {speaker} like learning hands-on skills?",
    "place": "Does {speaker} enjoy traveling abroad?",
    "band": "Would {speaker} buy tickets to a music festival?",
    "book": "Would {speaker} enjoy a novel as a gift?",
    "org": "Is {speaker} community-minded?",
    "plant": "Does {speaker} have a green thumb?",
    "bodypart": "Is {speaker} an athletic person?",
    "field": "Would {speaker} be suited to a helping profession?",
    "relative": "Is {speaker} close to their extended family?",
    "instrument": "Would {speaker} enjoy playing in a band?",
    "city": "Is {speaker} willing to uproot their life?",
    "dish": "Does {speaker} like spending time in the kitchen?",
}
MULTI_HOP = {
    "group": "Which support groups has {speaker} been to?",
    "subject": "What has {speaker} painted?",
    "park": "Where has {speaker} gone camping?",
    "race": "What charity races has {speaker} run?",
    "breed": "What pets does {speaker} have?",
    "role": "What job offers has {speaker} had?",
    "hobby": "What classes has {speaker} taken?",
    "place": "Which places has {speaker} traveled to?",
    "band": "Which bands has {speaker} seen live?",
    "book": "What books has {speaker} read?",
    "org": "Where has {speaker} volunteered?",
    "plant": "What has {speaker} planted?",
    "bodypart": "What injuries has {speaker} had?",
    "field": "What careers has {speaker} considered?",
    "relative": "Whose weddings has {speaker} been to?",
    "instrument": "Which instruments has {speaker} learned?",
    "city": "Where has {speaker} thought of moving?",
    "dish": "What has {speaker} baked?",
}
ECHO = [
    "{Key}? No way, that's amazing!",
    "Oh I love that, {key} sounds perfect for you.",
    "Ha, {key}, that is so you.",
    "Wait, {key}? Tell me everything next time!",
    "{Key}! I remember you mentioning that.",
]
SHARES = {"single-hop": 0.55, "temporal": 0.21, "multi-hop": 0.18, "open-domain": 0.06}


def generate_locomo(
    sessions: int = 25, seed: int = 7, events_per_speaker: int = 24, kinds_per_speaker: int = 9, questions: int = 150
) -> tuple[list[Turn], list[tuple[str, tuple[int, ...], str]]]:
    """One LoCoMo-shaped conversation (set D): (turns, [(question, evidence turns, category)])."""
    rng = random.Random(seed)
    speakers = NAMES[seed % len(NAMES)]
    turns: list[Turn] = []
    happened: list[tuple[dict, str, dict[str, str]]] = []
    asked: list[tuple[str, tuple[int, ...], str]] = []
    said: dict[tuple[str, str], list[int]] = {}
    seen: set[tuple[str, str, str]] = set()
    months: list[str] = []  # the session month of each question about one event ("" for the others)
    # Both speakers draw their events from overlapping kinds, each kind several times.
    common = rng.sample(KINDS, kinds_per_speaker)
    events: list[tuple[dict, str]] = []
    for s in speakers:
        mine = rng.sample(common, kinds_per_speaker - 2) + rng.sample([k for k in KINDS if k not in common], 2)
        events += [(mine[i % len(mine)], s) for i in range(events_per_speaker)]
    rng.shuffle(events)
    per_session = [events[i::sessions] for i in range(sessions)]
    day = date(2023, 1, 8) + timedelta(days=rng.randint(0, 300))
    for session, todays in enumerate(per_session):
        day += timedelta(days=rng.randint(4, 20))

        def say(
            speaker: str,
            template: str,
            values: dict[str, str] | None = None,
            tail: bool = False,
            session: int = session,
            day: date = day,
        ) -> int:
            friend = speakers[1 - speakers.index(speaker)]
            if rng.random() > NAME_SHARE:
                template = re.sub(r", \{(friend|speaker)\}", "", template)
            if tail and rng.random() < 0.6:
                template += " " + rng.choice(TAILS)
            text = template.format(**{"speaker": speaker, **(values or {}), "friend": friend})
            turns.append(Turn(speaker, text[0].upper() + text[1:], session, day))
            return len(turns) - 1

        def chat(count: int) -> None:
            for _ in range(count):
                if happened and rng.random() < 0.5:  # the topic comes back
                    kind, who, values = rng.choice(happened)
                    say(who, rng.choice(kind["callback"]), values, tail=True)
                else:
                    say(rng.choice(speakers), " ".join(rng.sample(TALK[1:], rng.randint(1, 2))))

        say(speakers[session % 2], rng.choice(TALK[:1]))
        for kind, speaker in todays:
            chat(rng.randint(0, 3))
            values = {k: rng.choice(v) for k, v in kind["slots"].items()}
            slot = next(iter(kind["slots"]))
            fresh = [v for v in kind["slots"][slot] if (slot, speaker, v) not in seen] or kind["slots"][slot]
            values[slot] = rng.choice(fresh)  # a second trip goes somewhere else
            seen.add((slot, speaker, values[slot]))
            values["rel"] = rng.choice(RELATIVE)
            values["Rel"] = values["rel"][0].upper() + values["rel"][1:]
            values["speaker"] = speaker
            values["key"] = values[slot].strip("'")
            values["Key"] = values["key"][0].upper() + values["key"][1:]
            friend = speakers[1 - speakers.index(speaker)]
            at = {"say": say(speaker, rng.choice(kind["say"]), values, tail=True)}
            say(friend, rng.choice(kind["ask"]), values)
            at["detail"] = say(speaker, rng.choice(kind["detail"]), values, tail=True)
            say(friend, rng.choice(ECHO) if rng.random() < 0.6 else rng.choice(TALK[1:]), values)
            happened.append((kind, speaker, values))
            said.setdefault((slot, speaker), []).append(at["say"])
            for question, target in kind["questions"]:
                asked.append((question.format(**values), (at[target],), "single-hop"))
            asked.append((PARAPHRASE[slot].format(**values), (at["say"],), "single-hop"))
            asked.append((TEMPORAL[slot].format(**values), (at["say"],), "temporal"))
            months[len(asked) - 4 :] = [f"{day:%B %Y}"] * 4
        chat(rng.randint(1, 4))
    # Multi-hop: everything a speaker did of one kind (two events or more, each evidence turn its share);
    # open-domain: a trait to infer from what they did (any of those turns supports it).
    for (slot, speaker), at_say in said.items():
        values = {"speaker": speaker}
        asked.append((OPEN_DOMAIN[slot].format(**values), tuple(at_say), "open-domain"))
        if len(at_say) > 1:
            asked.append((MULTI_HOP[slot].format(**values), tuple(at_say), "multi-hop"))
    months += [""] * (len(asked) - len(months))
    return turns, _sample(asked, months, rng, questions)


def _sample(asked: list, months: list[str], rng: random.Random, total: int) -> list:
    """Unambiguous questions in the benchmark's proportions of categories: one asked of two events of
    the same kind says when ("... in May 2023?", as people ask), and is left out if that is still ambiguous."""
    counts = Counter(q for q, _, _ in asked)
    anchored = [
        (q if counts[q] == 1 or not month else q.rstrip("?") + f" in {month}?", *rest)
        for (q, *rest), month in zip(asked, months, strict=True)
    ]
    counts = Counter(q for q, _, _ in anchored)
    pool: dict[str, list] = {}
    for item in anchored:
        if counts[item[0]] == 1:
            pool.setdefault(item[2], []).append(item)
    out = []
    for category, share in SHARES.items():
        have = pool.get(category, [])
        out += rng.sample(have, min(len(have), round(total * share)))
    return out


def generate_locomo_set(
    conversations: int = 10, sessions: int = 25, seed: int = 7
) -> list[tuple[list[Turn], list[tuple[str, tuple[int, ...], str]]]]:
    return [generate_locomo(sessions, seed * 1000 + i) for i in range(conversations)]
