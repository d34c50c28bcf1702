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
    sessions: int = 25,
    seed: int = 7,
    events_per_speaker: int = 24,
    kinds_per_speaker: int = 9,
    questions: int = 150,
    lang: str = "en",
    own_kinds: int = 2,
) -> tuple[list[Turn], list[tuple[str, tuple[int, ...], str]]]:
    """One LoCoMo-shaped conversation (set D): (turns, [(question, evidence turns, category)]).

    `lang` "zh": the same in Chinese (KINDS_ZH, fewer kinds, so fewer kinds per speaker)."""
    rng = random.Random(seed)
    zh = lang == "zh"
    kinds, talk, tails, echo, relative = (
        (KINDS_ZH, TALK_ZH, TAILS_ZH, ECHO_ZH, RELATIVE_ZH) if zh else (KINDS, TALK, TAILS, ECHO, RELATIVE)
    )
    if zh:
        kinds_per_speaker = min(kinds_per_speaker, len(kinds) - 3)
    speakers = (NAMES_ZH if zh else NAMES)[seed % len(NAMES_ZH if zh else NAMES)]
    join = "" if zh else " "
    turns: list[Turn] = []
    happened: list[tuple[dict, str, dict[str, str]]] = []
    asked: list[tuple[str, tuple[int, ...], str]] = []
    said: dict[tuple[str, str], list[int]] = {}
    by_slot: dict[str, dict] = {}
    seen: set[tuple[str, str, str]] = set()
    months: list[str] = []  # the session month of each question about one event ("" for the others)
    # Both speakers draw their events from overlapping kinds, each kind several times.
    common = rng.sample(kinds, kinds_per_speaker)
    events: list[tuple[dict, str]] = []
    for s in speakers:
        mine = rng.sample(common, kinds_per_speaker - own_kinds)
        mine += rng.sample([k for k in kinds if k not in common], own_kinds)
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
                template = re.sub(r"[,，] ?\{(friend|speaker)\}", "", template)
            if tail and rng.random() < 0.6:
                template += join + rng.choice(tails)
            text = template.format(**{"speaker": speaker, **(values or {}), "friend": friend})
            turns.append(Turn(speaker, text[0].upper() + text[1:], session, day))
            return len(turns) - 1

        def chat(count: int) -> None:
            for _ in range(count):
                if happened and rng.random() < 0.5:  # the topic comes back
                    kind, who, values = rng.choice(happened)
                    say(who, rng.choice(kind["callback"]), values, tail=True)
                else:
                    say(rng.choice(speakers), join.join(rng.sample(talk[1:], rng.randint(1, 2))))

        say(speakers[session % 2], rng.choice(talk[:1]))
        for kind, speaker in todays:
            chat(rng.randint(0, 3))
            values = {k: rng.choice(v) for k, v in kind["slots"].items()}
            slot = next(iter(kind["slots"]))
            fresh = [v for v in kind["slots"][slot] if (slot, speaker, v) not in seen] or kind["slots"][slot]
            values[slot] = rng.choice(fresh)  # a second trip goes somewhere else
            seen.add((slot, speaker, values[slot]))
            values["rel"] = rng.choice(relative)
            values["Rel"] = values["rel"][0].upper() + values["rel"][1:]
            values["speaker"] = speaker
            values["key"] = values[slot].strip("'")
            values["Key"] = values["key"][0].upper() + values["key"][1:]
            friend = speakers[1 - speakers.index(speaker)]
            at = {"say": say(speaker, rng.choice(kind["say"]), values, tail=True)}
            say(friend, rng.choice(kind["ask"]), values)
            at["detail"] = say(speaker, rng.choice(kind["detail"]), values, tail=True)
            say(friend, rng.choice(echo) if rng.random() < 0.6 else rng.choice(talk[1:]), values)
            happened.append((kind, speaker, values))
            said.setdefault((slot, speaker), []).append(at["say"])
            by_slot[slot] = kind
            for question, target in kind["questions"]:
                asked.append((question.format(**values), (at[target],), "single-hop"))
            asked.append((kind.get("paraphrase", PARAPHRASE.get(slot)).format(**values), (at["say"],), "single-hop"))
            asked.append((kind.get("temporal", TEMPORAL.get(slot)).format(**values), (at["say"],), "temporal"))
            count = len(kind["questions"]) + 2
            months[len(asked) - count :] = [f"{day.year}年{day.month}月" if zh else f"{day:%B %Y}"] * count
        chat(rng.randint(1, 4))
    # Multi-hop: everything a speaker did of one kind (two events or more, each evidence turn its share);
    # open-domain: a trait to infer from what they did (any of those turns supports it).
    for (slot, speaker), at_say in said.items():
        values = {"speaker": speaker}
        kind = by_slot[slot]
        asked.append((kind.get("open", OPEN_DOMAIN.get(slot)).format(**values), tuple(at_say), "open-domain"))
        if len(at_say) > 1:
            asked.append((kind.get("multi", MULTI_HOP.get(slot)).format(**values), tuple(at_say), "multi-hop"))
    months += [""] * (len(asked) - len(months))
    return turns, _sample(asked, months, rng, questions)


def _anchor(question: str, month: str) -> str:
    if question.endswith("？"):
        return f"{month}，{question}"
    return question.rstrip("?") + f" in {month}?"


def _sample(asked: list, months: list[str], rng: random.Random, total: int) -> list:
    """Unambiguous questions in the benchmark's proportions of categories: one asked of two events of
    the same kind says when ("... in May 2023?", as people ask), and is left out if that is still ambiguous."""
    counts = Counter(q for q, _, _ in asked)
    anchored = [
        (q if counts[q] == 1 or not month else _anchor(q, month), *rest)
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
    conversations: int = 10, sessions: int = 25, seed: int = 7, lang: str = "en"
) -> list[tuple[list[Turn], list[tuple[str, tuple[int, ...], str]]]]:
    return [generate_locomo(sessions, seed * 1000 + i, lang=lang) for i in range(conversations)]


# The same shape in Chinese (set D's Chinese share): two speakers chatting in Chinese, asked in Chinese.
KINDS_ZH: list[dict] = [
    {
        "slots": {
            "place": ["京都", "成都", "大理", "厦门", "清迈", "西安"],
            "food": ["火锅", "拉面", "米线", "海鲜粥"],
        },
        "say": ["我{rel}刚从{place}回来，玩得太开心了！", "{rel}我和姐姐在{place}待了一个星期。"],
        "ask": ["好羡慕，{speaker}！最难忘的是什么？", "快跟我说说，那边怎么样？"],
        "detail": ["每天都吃{food}，吃不腻。", "印象最深的就是{food}，现在还想着。"],
        "callback": ["我还在想念{place}呢，{friend}。", "好想再出去旅行一次。"],
        "questions": [("{speaker}去{place}每天吃什么？", "detail")],
        "paraphrase": "{speaker}最近去哪里度假了？",
        "temporal": "{speaker}什么时候去的{place}？",
        "open": "{speaker}喜欢出门旅行吗？",
        "multi": "{speaker}都去过哪些地方旅行？",
    },
    {
        "slots": {"breed": ["柯基", "柴犬", "金毛", "布偶猫", "橘猫"], "petname": ["豆豆", "团子", "可乐", "馒头"]},
        "say": ["我们{rel}从救助站领养了一只{breed}！", "{rel}家里多了一只{breed}。"],
        "ask": ["好可爱，{speaker}！起了什么名字？", "太萌了！叫什么？"],
        "detail": ["叫{petname}，是孩子们起的。", "我们叫它{petname}，特别适合它。"],
        "callback": ["{petname}又把我的鞋咬坏了，{friend}。", "每天早上遛{petname}让我心情很好。"],
        "questions": [("{speaker}的宠物叫什么名字？", "detail")],
        "paraphrase": "{speaker}家里新来了什么动物？",
        "temporal": "{speaker}什么时候领养的{breed}？",
        "open": "{speaker}是个喜欢动物的人吗？",
        "multi": "{speaker}养了哪些宠物？",
    },
    {
        "slots": {
            "hobby": ["陶艺", "书法", "烘焙", "摄影", "国画"],
            "teacher": ["陈老师", "林老师", "周老师", "赵老师"],
        },
        "say": ["我报了社区中心的{hobby}课。", "{rel}我上了第一节{hobby}课，终于开始了！"],
        "ask": ["真好，{speaker}！上得怎么样？", "不错嘛！课好不好？"],
        "detail": ["比想象的难，不过{teacher}特别有耐心。", "我很喜欢，{teacher}让每个人都很放松。"],
        "callback": ["这周的课也很有意思，{friend}，我慢慢进步了。", "昨天上课又弄得一团糟，哈哈。"],
        "questions": [("{speaker}的{hobby}课是谁教的？", "detail")],
        "paraphrase": "{speaker}在社区学什么手艺？",
        "temporal": "{speaker}什么时候开始上{hobby}课的？",
        "open": "{speaker}喜欢动手学新技能吗？",
        "multi": "{speaker}上过哪些兴趣课？",
    },
    {
        "slots": {
            "band": ["五月天", "周杰伦", "陈奕迅", "苏打绿"],
            "song": ["他们最火的歌", "一首安静的老歌", "我们的婚礼歌曲"],
        },
        "say": ["我{rel}去看了{band}的演唱会，前排！", "{rel}我们去听了{band}的现场！"],
        "ask": ["真的假的，{speaker}！最精彩的是什么？", "好羡慕！演出怎么样？"],
        "detail": ["最后唱了{song}，我都哭了。", "现场听到{song}，起鸡皮疙瘩。"],
        "callback": ["这周一直在循环{band}的歌，{friend}。", "音乐真的能帮我度过难熬的日子。"],
        "questions": [("{speaker}在演唱会上听到哪首歌哭了？", "detail")],
        "paraphrase": "{speaker}去看了哪位歌手的现场表演？",
        "temporal": "{speaker}什么时候看的{band}演唱会？",
        "open": "{speaker}会买音乐节的门票吗？",
        "multi": "{speaker}看过哪些演唱会？",
    },
    {
        "slots": {"book": ["《活着》", "《围城》", "《平凡的世界》", "《白夜行》"], "club": ["读书会", "同事", "表妹"]},
        "say": ["我最近在读{book}，根本停不下来。", "我{rel}读完了{book}，太震撼了。"],
        "ask": ["讲的是什么，{speaker}？", "我正好缺书看！好看吗？"],
        "detail": ["是{club}推荐给我的，特别感人。", "{club}推荐的，看得我很难过。"],
        "callback": ["睡前看书成了我的小习惯，{friend}。", "最近书是我的避风港。"],
        "questions": [("谁给{speaker}推荐了{book}？", "detail")],
        "paraphrase": "{speaker}最近在看哪部小说？",
        "temporal": "{speaker}什么时候读的{book}？",
        "open": "送{speaker}一本小说当礼物合适吗？",
        "multi": "{speaker}读过哪些书？",
    },
    {
        "slots": {
            "org": ["流浪动物救助站", "食物银行", "儿童医院", "社区图书馆"],
            "task": ["整理捐赠物资", "给孩子们读书", "遛狗", "在前台接待"],
        },
        "say": ["我周末在{org}做志愿者。", "{rel}我开始去{org}当志愿者了。"],
        "ask": ["你真好，{speaker}。在那边做什么？", "太棒了！怎么开始的？"],
        "detail": ["主要是{task}，是我一周最开心的时候。", "我负责{task}，让我很踏实。"],
        "callback": ["做公益让我觉得和大家很亲近，{friend}。", "{org}又缺志愿者了。"],
        "questions": [("{speaker}在{org}做什么？", "detail")],
        "paraphrase": "{speaker}在哪里免费帮忙？",
        "temporal": "{speaker}什么时候开始在{org}做志愿者的？",
        "open": "{speaker}热心社区的事吗？",
        "multi": "{speaker}在哪些地方做过志愿者？",
    },
    {
        "slots": {
            "bodypart": ["脚踝", "膝盖", "手腕", "肩膀"],
            "sport": ["篮球", "足球", "网球", "羽毛球"],
            "rest": ["两周", "一个月", "六周"],
        },
        "say": ["我{rel}打{sport}的时候伤了{bodypart}。", "{rel}练{sport}把{bodypart}扭了。"],
        "ask": ["天哪，{speaker}！你还好吗？", "哎呀！医生怎么说？"],
        "detail": ["医生说要休息{rest}，每周做两次理疗。", "{rest}不能运动，医生的命令。"],
        "callback": ["我的{bodypart}好多了，{friend}，慢慢来。", "好想念运动的日子。"],
        "questions": [("医生让{speaker}休息多久？", "detail")],
        "paraphrase": "{speaker}身体哪个部位受伤了？",
        "temporal": "{speaker}什么时候伤的{bodypart}？",
        "open": "{speaker}是个爱运动的人吗？",
        "multi": "{speaker}受过哪些伤？",
    },
    {
        "slots": {
            "dish": ["柠檬蛋糕", "香蕉面包", "苹果派", "曲奇饼干"],
            "occasion": ["学校义卖", "公司聚会", "邻居野餐", "教会聚餐"],
        },
        "say": ["我{rel}为{occasion}烤了{dish}。", "{rel}我做了{dish}带去{occasion}。"],
        "ask": ["好香，{speaker}！大家喜欢吗？", "给我留一块！怎么样？"],
        "detail": ["十分钟就卖光了，我好骄傲。", "一下子就没了，还有人问我要配方。"],
        "callback": ["烘焙是我解压的方式，{friend}。", "我又把饼干烤焦了，哈哈。"],
        "questions": [("{speaker}为{occasion}做了什么？", "say")],
        "paraphrase": "{speaker}为活动做了什么点心？",
        "temporal": "{speaker}什么时候为{occasion}烤的{dish}？",
        "open": "{speaker}喜欢待在厨房吗？",
        "multi": "{speaker}烤过哪些东西？",
    },
    {
        "slots": {"relative": ["哥哥", "姐姐", "表妹", "好朋友"], "venue": ["葡萄园", "海边", "老谷仓", "植物园"]},
        "say": ["我{relative}{rel}结婚了！", "{rel}是我{relative}的婚礼，好感动。"],
        "ask": ["恭喜他们，{speaker}！在哪里办的？", "哇！婚礼怎么样？"],
        "detail": ["在{venue}，交换誓言的时候下了五分钟雨。", "在{venue}办的，很美，我跳了一整晚。"],
        "callback": ["婚礼总让我很感性，{friend}。", "跳了一晚上舞，现在还没缓过来。"],
        "questions": [("{speaker}的{relative}在哪里办的婚礼？", "detail")],
        "paraphrase": "{speaker}家里谁成家了？",
        "temporal": "{speaker}的{relative}什么时候结的婚？",
        "open": "{speaker}和亲戚关系亲近吗？",
        "multi": "{speaker}参加过谁的婚礼？",
    },
    {
        "slots": {
            "instrument": ["吉他", "小提琴", "钢琴", "尤克里里"],
            "tune": ["《月亮代表我的心》", "《童年》", "《茉莉花》", "给儿子的摇篮曲"],
        },
        "say": ["我最近在学{instrument}。", "{rel}我开始上{instrument}课了！"],
        "ask": ["好酷，{speaker}！能弹完整首歌了吗？", "不错！在练什么？"],
        "detail": ["我已经能从头到尾弹{tune}了！", "在练{tune}，手指好疼，哈哈。"],
        "callback": ["每天晚上都在练，{friend}，很放松。", "音乐真是很好的疗愈。"],
        "questions": [("{speaker}会弹哪首曲子？", "detail")],
        "paraphrase": "{speaker}在学什么乐器？",
        "temporal": "{speaker}什么时候开始学{instrument}的？",
        "open": "{speaker}会喜欢在乐队里演奏吗？",
        "multi": "{speaker}学过哪些乐器？",
    },
]
TALK_ZH = [
    "嗨{friend}！好久不见！最近怎么样？",
    "谢谢你，{friend}！这对我意义很大。",
    "最近工作和孩子的事忙得不行，不过还撑得住。",
    "太励志了，{friend}！我真为你骄傲。",
    "你总是能让我开心。",
    "我懂，有些星期就是很累。",
    "太好了！多说说！",
    "哈哈，我也是。",
    "这周很忙，不过挺充实的。",
    "我最近在努力给自己多留点时间。",
    "家人一直是我最大的支柱。",
    "很高兴我们一直保持联系，{friend}。",
    "照顾好自己哦。",
    "听起来压力不小，但你可以的。",
    "最近的生活像坐过山车一样。",
    "天气特别好，我们在外面待了一整天。",
    "这周睡得不好，心里事太多。",
    "谢谢你一直都在。",
]
TAILS_ZH = [
    "真的很感动。",
    "我觉得自己很幸运。",
    "开心了一整个星期。",
    "没想到会这么激动。",
    "孩子们也很兴奋。",
    "现在想起来还会笑。",
]
ECHO_ZH = ["{key}？真的假的，太棒了！", "哇，{key}，很适合你。", "哈哈，{key}，太像你了。", "{key}！我记得你提过。"]
RELATIVE_ZH = ["昨天", "上周末", "上周五", "前两天", "上周"]
NAMES_ZH = [("王芳", "李静"), ("张伟", "刘洋"), ("陈晨", "赵敏"), ("杨帆", "周婷"), ("黄磊", "吴霞")]
