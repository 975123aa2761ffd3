"""Seeded synthetic long conversations with planted facts, later corrections and recall probes.

Real long chats with known answers are scarce, so we plant 6-8 personal facts in 120-200+ turns
of small talk and ask about them later. The filler reuses the facts' generic words ("budget",
"schedule", "nuts") and the questions avoid the facts' own words, so word overlap alone cannot
find the page that holds an answer. Only the standard library is used and every choice comes
from ``random.Random(seed)``, so a seed always gives the same conversation.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

from localpager.core.choices import choose
from localpager.core.records import GENERAL_PROBE, Probe, Transcript, Turn

from .choices import Phrasing

FACT_TYPES = (
    "allergy", "budget", "deadline", "contact", "medical", "preference", "schedule", "number",
)

FACTS_PER_CONVERSATION = (6, 8)
UPDATES_PER_CONVERSATION = (1, 2)
MIN_TURNS = 60
TAIL_TURNS = 20  # filler only, so every fact sits in an evicted page when probed at the end
REVISIT_GAP = 20  # turns between a fact and a mid-conversation probe of it


@dataclass(frozen=True)
class FactKind:
    """One way a fact type shows up: how the user states it, corrects it and is asked about it.

    ``value`` names a value maker and its arguments; templates fill ``{v}`` (the value) and
    whatever extra fields that maker provides (``{day}``, ``{dose}``, ``{phone}``, ``{email}``).
    """

    name: str
    type: str
    value: tuple[str | int, ...]
    says: tuple[str, ...]
    asks: tuple[str, ...]
    updates: tuple[str, ...] = ()


@dataclass(frozen=True)
class FillerTopic:
    """Small-talk exchanges (user, assistant) whose ``{slot}`` fields are drawn from ``slots``."""

    exchanges: tuple[tuple[str, str], ...]
    slots: dict[str, tuple[str, ...]] = field(default_factory=dict)


# --- value pools ----------------------------------------------------------------------------------
# Word pools: the first entry is written in the conversation, all entries are accepted answers.

WORD_POOLS: dict[str, tuple[tuple[str, ...], ...]] = {
    "food_allergens": (
        ("peanuts", "peanut"), ("shellfish",), ("sesame", "sesame seeds"), ("walnuts", "walnut"),
        ("strawberries", "strawberry"), ("kiwi", "kiwis", "kiwifruit"), ("hazelnuts", "hazelnut"),
        ("cashews", "cashew"),
    ),
    "drug_allergens": (
        ("penicillin",), ("amoxicillin",), ("aspirin",), ("codeine",), ("sulfa drugs", "sulfa"),
        ("ibuprofen",),
    ),
    "pets": (
        ("cats", "cat"), ("dogs", "dog"), ("horses", "horse"), ("rabbits", "rabbit"),
        ("hamsters", "hamster"), ("guinea pigs", "guinea pig"),
    ),
    "bp_drugs": (("lisinopril",), ("amlodipine",), ("losartan",), ("metoprolol",)),
    "statins": (("atorvastatin",), ("rosuvastatin",), ("simvastatin",), ("pravastatin",)),
    "migraine_drugs": (("sumatriptan",), ("rizatriptan",), ("naproxen",), ("zolmitriptan",)),
    "colors": (
        ("teal",), ("burgundy",), ("lavender",), ("mustard yellow", "mustard"),
        ("olive green", "olive"), ("coral",), ("navy blue", "navy"),
    ),
    "cuisines": (
        ("Thai",), ("Ethiopian",), ("Lebanese",), ("Korean",), ("Peruvian",), ("Vietnamese",),
        ("Moroccan",),
    ),
    "flowers": (
        ("sunflowers", "sunflower"), ("tulips", "tulip"), ("peonies", "peony"),
        ("daisies", "daisy"), ("orchids", "orchid"), ("lilies", "lily"), ("dahlias", "dahlia"),
    ),
    "music": (("jazz",), ("reggae",), ("bluegrass",), ("flamenco",), ("techno",), ("opera",)),
}

MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
FIRST_NAMES = (
    "Maria", "Omar", "Priya", "Tomasz", "Aiko", "Kwame", "Lucia", "Henrik", "Fatima", "Diego",
    "Ingrid", "Ravi", "Mateo", "Yuki", "Nadia", "Elena", "Jonas", "Amara",
)
LAST_NAMES = (
    "Chen", "Haddad", "Nair", "Kowalski", "Tanaka", "Mensah", "Ferreira", "Lindqvist", "Okafor",
    "Alvarez", "Novak", "Brennan", "Castillo", "Petrov", "Dubois", "Sato",
)
MAIL_DOMAINS = ("example.com", "mailbox.org", "fastpost.net", "ledgerly.io")
AIRLINES = ("BA", "LH", "AF", "KL", "IB", "UA", "DL", "AC")
DOSES = ("5 mg", "10 mg", "20 mg", "25 mg", "40 mg", "50 mg", "100 mg")
PARKING_LEVELS = "ABCDEF"

# --- facts ----------------------------------------------------------------------------------------
# Questions must need the fact without repeating its words: "snack" for a peanut allergy,
# "lease" for a landlord, "hypertension" for blood pressure.

FACT_KINDS: tuple[FactKind, ...] = (
    FactKind(
        "food_allergy", "allergy", ("pool", "food_allergens"),
        says=(
            "I'm allergic to {v}, so I have to read every label carefully.",
            "Heads up: even a trace of {v} sends me to the ER.",
            "I'm badly allergic to {v} and carry an EpiPen everywhere.",
        ),
        asks=(
            "Which snack should I keep away from at the party?",
            "What ingredient must never end up in a dish cooked for me?",
            "What should the caterer leave off my plate at the wedding?",
        ),
    ),
    FactKind(
        "drug_allergy", "allergy", ("pool", "drug_allergens"),
        says=(
            "I'm allergic to {v}; it gives me an awful rash.",
            "I reacted badly to {v} once and my throat swelled up.",
        ),
        asks=(
            "Which medicine must a doctor never prescribe me?",
            "What should the pharmacist know I can't take?",
        ),
    ),
    FactKind(
        "pet_allergy", "allergy", ("pool", "pets"),
        says=(
            "I can't be around {v}; my eyes swell shut within minutes.",
            "Being near {v} makes my throat itch and my nose run for days.",
        ),
        asks=(
            "Which animal would make me sneeze if my roommate adopted one?",
            "What kind of pet can never live in my apartment?",
        ),
    ),
    FactKind(
        "laptop_budget", "budget", ("money", 700, 2500, 50),
        says=(
            "I can spend at most {v} on a new laptop.",
            "My ceiling for the laptop upgrade is {v}.",
        ),
        asks=(
            "How much am I willing to pay for the computer?",
            "What can I afford for the replacement notebook computer?",
        ),
        updates=(
            "Actually my budget for the laptop changed to {v}.",
            "Change of plans: I can go up to {v} for the laptop now.",
        ),
    ),
    FactKind(
        "trip_budget", "budget", ("money", 1500, 6000, 100),
        says=(
            "My spending cap for the Lisbon trip is {v} all in.",
            "For Lisbon I've set aside {v} in total.",
        ),
        asks=(
            "How much money can I take to Portugal?",
            "What can I afford for my Portuguese holiday?",
        ),
        updates=(
            "Actually my budget for Lisbon changed to {v}.",
            "I got a bonus, so the Lisbon trip can go up to {v}.",
        ),
    ),
    FactKind(
        "kitchen_budget", "budget", ("money", 8000, 40000, 500),
        says=(
            "For the kitchen remodel I've set aside {v}, and not a cent more.",
            "The kitchen renovation has to come in under {v}.",
        ),
        asks=(
            "How much am I willing to pay for new cabinets and counters?",
            "What can I afford for new cabinets and countertops?",
        ),
        updates=(
            "Actually the kitchen budget changed to {v}.",
            "We refinanced, so the kitchen can now take {v}.",
        ),
    ),
    FactKind(
        "rent_budget", "budget", ("money", 900, 3200, 50),
        says=(
            "I can afford {v} a month for an apartment, tops.",
            "My housing cap is {v} per month.",
        ),
        asks=("What's the highest rent I could handle?", "How pricey a flat can I take on?"),
        updates=(
            "Actually my budget changed to {v} a month.",
            "With the raise, I can now afford {v} monthly.",
        ),
    ),
    FactKind(
        "grant_deadline", "deadline", ("date",),
        says=(
            "My grant report is due on {v}, with no extensions.",
            "The foundation wants my grant report by {v}.",
        ),
        asks=(
            "By what date must the paperwork for my research funding be submitted?",
            "When do I have to send the funders my write-up?",
        ),
        updates=(
            "Good news: the grant office moved my report deadline to {v}.",
            "Actually the report is now due {v}.",
        ),
    ),
    FactKind(
        "tax_deadline", "deadline", ("date",),
        says=("I have to file my taxes by {v} this year.", "My tax return must be in by {v}."),
        asks=(
            "When is the last day to get my paperwork to the revenue office?",
            "By what date does the government need my income forms?",
        ),
        updates=(
            "My accountant got me an extension, so the taxes are now due {v}.",
            "Actually the tax filing cutoff moved to {v}.",
        ),
    ),
    FactKind(
        "pitch_deadline", "deadline", ("date",),
        says=(
            "The pitch deck for the Hartley account has to be ready by {v}.",
            "I promised the Hartley team their pitch deck by {v}.",
        ),
        asks=(
            "When must the slides for my client presentation be finished?",
            "By what day does the sales presentation need to be done?",
        ),
        updates=(
            "The Hartley people pushed the deck to {v}.",
            "Actually the pitch deck is due {v} now.",
        ),
    ),
    FactKind(
        "passport_deadline", "deadline", ("date",),
        says=(
            "My passport renewal has to be submitted by {v}.",
            "The consulate needs my passport forms by {v}.",
        ),
        asks=(
            "When do my travel documents need to be handed in?",
            "What's the cutoff for handing in my travel papers?",
        ),
        updates=(
            "The consulate extended it; the passport paperwork is due {v}.",
            "Actually my passport renewal is now due {v}.",
        ),
    ),
    FactKind(
        "landlord_contact", "contact", ("person",),
        says=(
            "My landlord is {v}; the number is {phone}.",
            "If anything breaks at the flat, {v} is the landlord, on {phone}.",
        ),
        asks=("Who should I call about the lease?", "Who do I contact if the rent terms change?"),
        updates=("The building changed hands, so my landlord is now {v}, at {phone}.",),
    ),
    FactKind(
        "plumber_contact", "contact", ("person",),
        says=(
            "The plumber I trust is {v}, reachable at {phone}.",
            "For any leaks I use {v}; the number's {phone}.",
        ),
        asks=(
            "Who do I phone when a pipe bursts?",
            "Who should fix the dripping tap under the sink?",
        ),
        updates=("My old plumber retired; the new one is {v}, {phone}.",),
    ),
    FactKind(
        "vet_contact", "contact", ("person",),
        says=(
            "Our bird vet is {v}, email {email}.",
            "{v} takes care of our parrot; write to {email}.",
        ),
        asks=(
            "Who do I see when my feathered friend gets sick?",
            "Which animal doctor looks after our feathered pet?",
        ),
        updates=("We switched vets; the parrot now sees {v}, {email}.",),
    ),
    FactKind(
        "accountant_contact", "contact", ("person",),
        says=(
            "My accountant is {v}, email {email}.",
            "{v} does my books; you can reach them at {email}.",
        ),
        asks=("Who is handling my taxes this year?", "Who should get my receipts at year end?"),
        updates=("I changed accountants: it's {v} now, {email}.",),
    ),
    FactKind(
        "blood_pressure_drug", "medical", ("drug", "bp_drugs"),
        says=(
            "For my blood pressure I take {v}, {dose} every morning.",
            "My doctor has me on {v} for blood pressure, {dose} a day.",
        ),
        asks=(
            "Which medication keeps my hypertension under control?",
            "What do I rely on to keep my hypertension in check?",
        ),
        updates=("My doctor switched my blood pressure pill to {v}, {dose}.",),
    ),
    FactKind(
        "cholesterol_drug", "medical", ("drug", "statins"),
        says=(
            "I'm on {v} for my cholesterol, {dose} at night.",
            "I take {dose} of {v} each evening to keep cholesterol down.",
        ),
        asks=("Which prescription handles my lipid levels?", "What's the name of my statin?"),
        updates=("The cardiologist changed my cholesterol medicine to {v}, {dose}.",),
    ),
    FactKind(
        "migraine_drug", "medical", ("drug", "migraine_drugs"),
        says=(
            "When a migraine hits I take {v}, {dose}.",
            "For migraines my neurologist prescribed {v}, {dose} at the first sign.",
        ),
        asks=(
            "What should I reach for when one of my bad headaches starts?",
            "Which tablet stops my worst head pain?",
        ),
        updates=("My neurologist swapped my migraine medicine to {v}, {dose}.",),
    ),
    FactKind(
        "insulin_dose", "medical", ("units",),
        says=("I inject {v} of insulin before dinner.", "My evening insulin dose is {v}."),
        asks=(
            "How much diabetes medicine do I need with supper?",
            "What amount of my diabetes shot goes with the last meal of the day?",
        ),
        updates=(
            "My endocrinologist changed my insulin to {v} before dinner.",
            "Actually, the insulin dose is now {v}.",
        ),
    ),
    FactKind(
        "favorite_color", "preference", ("pool", "colors"),
        says=(
            "{v} has always been my favorite color.",
            "If I could paint everything {v}, I would.",
        ),
        asks=(
            "Which shade would I choose for my new bike?",
            "What hue should a sweater for me be?",
        ),
        updates=(
            "I've changed my mind: {v} is my favorite color now.",
            "These days I'm all about {v} instead.",
        ),
    ),
    FactKind(
        "favorite_cuisine", "preference", ("pool", "cuisines"),
        says=("Nothing beats {v} food for me.", "{v} is my favorite cuisine, hands down."),
        asks=(
            "What kind of restaurant should we book for my birthday dinner?",
            "Which menu would make me happiest on a night out?",
        ),
        updates=(
            "Lately I've switched: {v} food is my favorite now.",
            "I've changed my mind, I love {v} cooking most these days.",
        ),
    ),
    FactKind(
        "favorite_flower", "preference", ("pool", "flowers"),
        says=("{v} are my favorite flowers by far.", "Nothing cheers me up like a vase of {v}."),
        asks=("What should someone bring me as a bouquet?", "Which blooms would brighten my desk?"),
        updates=("I've changed my mind: {v} are my favorite flowers now.",),
    ),
    FactKind(
        "favorite_music", "preference", ("pool", "music"),
        says=(
            "I could listen to {v} all day; it's my favorite music.",
            "Nothing relaxes me like {v}.",
        ),
        asks=(
            "Which kind of concert would I enjoy most?",
            "What should be playing at my surprise party?",
        ),
        updates=(
            "I've been converted: {v} is my favorite music now.",
            "These days I mostly listen to {v}.",
        ),
    ),
    FactKind(
        "dentist_visit", "schedule", ("clock",),
        says=("My dentist appointment is on {day} at {v}.", "I'm seeing the dentist {day} at {v}."),
        asks=(
            "What time do I get my teeth cleaned?",
            "When should I show up for the checkup on my molars?",
        ),
        updates=(
            "The dentist's office moved me to {day} at {v}.",
            "Actually the dentist appointment is now {day} at {v}.",
        ),
    ),
    FactKind(
        "piano_lesson", "schedule", ("clock",),
        says=(
            "My daughter's piano lesson is every {day} at {v}.",
            "Piano lessons for my daughter are {day}s at {v}.",
        ),
        asks=(
            "What time do I drop my kid off at music class?",
            "When does my girl's weekly keyboard session start?",
        ),
        updates=("The piano teacher moved the lesson to {day}s at {v}.",),
    ),
    FactKind(
        "yoga_class", "schedule", ("clock",),
        says=("I go to yoga every {day} at {v}.", "My yoga class meets {day}s at {v}."),
        asks=(
            "What time does my stretching session start?",
            "When do I need my mat ready for the weekly session?",
        ),
        updates=("My yoga class moved to {day} at {v}.", "Actually yoga is now {day}s at {v}."),
    ),
    FactKind(
        "team_sync", "schedule", ("clock",),
        says=(
            "Our weekly team sync is on {day} at {v}.",
            "The team sync happens every {day} at {v}.",
        ),
        asks=(
            "What time is my recurring meeting with coworkers?",
            "When do I catch up with my colleagues each week?",
        ),
        updates=(
            "Heads up, the team sync got moved to {day} at {v}.",
            "Actually our sync is now {day}s at {v}.",
        ),
    ),
    FactKind(
        "hotel_room", "number", ("room",),
        says=("The front desk put me in room {v}.", "I'm staying in room {v} at the Harbor Hotel."),
        asks=(
            "What number is on the door where I'm sleeping this week?",
            "Which door do I unlock at the end of the day on this trip?",
        ),
        updates=(
            "They moved me to room {v} because of the noise.",
            "Actually I switched to room {v}, the old one had no view.",
        ),
    ),
    FactKind(
        "gym_locker", "number", ("locker",),
        says=("My gym locker is {v}.", "I keep my stuff in locker {v} at the gym."),
        asks=(
            "Where do I store my bag at the fitness center?",
            "Which cubby is mine at the fitness center?",
        ),
        updates=("The gym reassigned me to locker {v}.",),
    ),
    FactKind(
        "flight_number", "number", ("flight",),
        says=("I'm booked on flight {v} on Friday.", "My flight is {v}, leaving Friday morning."),
        asks=(
            "Which plane am I catching at the airport?",
            "What should I look for on the departures board?",
        ),
        updates=("The airline rebooked me onto flight {v}.", "Change of plans, I'm now on {v}."),
    ),
    FactKind(
        "parking_spot", "number", ("spot",),
        says=(
            "My car is parked in spot {v} at the garage.",
            "I left the car in bay {v}, level two.",
        ),
        asks=(
            "Where will I find my vehicle when I come back from the mall?",
            "Which space should I walk to after the concert?",
        ),
        updates=("I moved the car; it's in spot {v} now.",),
    ),
)

KINDS_BY_TYPE: dict[str, tuple[FactKind, ...]] = {
    fact_type: tuple(kind for kind in FACT_KINDS if kind.type == fact_type)
    for fact_type in FACT_TYPES
}

LEAD_INS = (  # the empty ones: most statements come without a lead-in
    "", "", "", "Oh, by the way.", "Before I forget, one thing.", "Unrelated, but worth saying.",
    "Quick note for later.",
)
ACKS = (
    "Got it, I'll keep that in mind.", "Noted, thanks for telling me.",
    "Thanks, I've made a note of that.", "Understood. I'll remember.", "Okay, good to know.",
    "Thanks for letting me know.",
)
UPDATE_ACKS = (
    "Thanks for the update; I'll go with the new one from now on.",
    "Noted, I've replaced the old one.", "Got it, updated.", "Okay, I'll use that from now on.",
)

# --- filler ---------------------------------------------------------------------------------------
# Deliberately full of the facts' generic words (budget, schedule, deadline, nuts, locker, dose,
# party, snack, lease, meeting) in unrelated senses.

FILLER_TOPICS: dict[str, FillerTopic] = {
    "cooking": FillerTopic(
        slots={
            "dish": (
                "risotto", "banana bread", "lentil soup", "stir-fry", "lasagna", "granola",
                "shakshuka", "ramen",
            ),
            "herb": ("basil", "thyme", "rosemary", "cilantro", "dill", "parsley"),
        },
        exchanges=(
            ("I'm making {dish} tonight. Would a handful of chopped nuts work on top?",
             "A few toasted nuts add crunch to {dish}; toast them in a dry pan first."),
            ("My {dish} came out bland last time. What went wrong?",
             "Usually it's salt and acid. Season in stages and finish {dish} with a squeeze of "
             "lemon."),
            ("Is fresh {herb} worth the extra cost?",
             "For {dish}, yes: fresh {herb} added at the end tastes much brighter than dried."),
            ("I'm on a tight schedule tonight. Can {dish} be done in thirty minutes?",
             "If you prep everything before the stove goes on, {dish} fits in half an hour."),
            ("How long will {dish} keep in the fridge?",
             "Three to four days in a sealed container is a safe rule for {dish}."),
            ("Any tips for cooking {dish} for a crowd?",
             "Double the recipe, use a wider pan, and save the {herb} for the very end."),
        ),
    ),
    "travel": FillerTopic(
        slots={
            "city": (
                "Kyoto", "Montreal", "Edinburgh", "Cape Town", "Oaxaca", "Reykjavik", "Tallinn",
            ),
            "transport": ("train", "ferry", "night bus", "coach"),
        },
        exchanges=(
            ("I'm thinking about a weekend in {city}. Is the {transport} a good way to get there?",
             "The {transport} is comfortable, and booking a few weeks ahead usually saves money."),
            ("The {transport} schedule to {city} looks confusing. Any tips?",
             "Check the {transport} schedule the day before; timetables often change in the "
             "off-season."),
            ("Which neighborhoods in {city} are good for walking?",
             "The old center of {city} is lovely on foot, especially early in the morning."),
            ("Can a backpacker see {city} on a small budget?",
             "Plenty of people do {city} cheaply with guesthouses, markets and free walking "
             "tours."),
            ("What should I pack for {city} this time of year?",
             "Layers and a light rain jacket cover most surprises in {city}."),
            ("Is it worth renting a car in {city}?",
             "In {city} public transport is usually easier than parking, so skip the car."),
        ),
    ),
    "sports": FillerTopic(
        slots={
            "team": ("the Hawks", "the Rovers", "the Comets", "the Mariners"),
            "sport": ("basketball", "tennis", "cycling", "swimming", "soccer"),
        },
        exchanges=(
            ("Did you catch how {team} played last night?",
             "Fans of {team} had a rough week, but the defense looked sharper."),
            ("I want to get back into {sport}. How should I start?",
             "Ease into {sport} with two short sessions a week and plenty of rest."),
            ("Apparently the locker room was tense before the final. Is that normal?",
             "Pre-game nerves in the locker room are completely normal, even for pros."),
            ("What's a good warm-up before {sport}?",
             "Dynamic stretches and a light jog are a solid warm-up before {sport}."),
            ("Do you think {team} will make the playoffs?",
             "If {team} keep their starters healthy, they have a real shot."),
            ("How do I watch {sport} without paying for cable?",
             "Many leagues stream {sport} directly; check the official app first."),
        ),
    ),
    "work": FillerTopic(
        slots={
            "task": (
                "the quarterly report", "a code review", "the onboarding guide",
                "a vendor contract", "the hiring plan",
            ),
            "colleague": ("my manager", "a coworker", "the new intern", "our director"),
        },
        exchanges=(
            ("{colleague} keeps moving the deadline on {task}. How do I push back politely?",
             "Ask for priorities in writing; it makes deadline conversations much calmer."),
            ("How do I stay focused when {task} drags on all week?",
             "Break {task} into small pieces and finish one before lunch each day."),
            ("Is it rude to block my calendar for deep work?",
             "Not at all. Keep the blocks predictable so people can plan around them."),
            ("The team budget for {task} got cut. Any advice?",
             "When a budget shrinks, trim the scope first and protect the quality of what "
             "remains."),
            ("{colleague} schedules meetings during lunch. Should I say something?",
             "A friendly note suggesting other slots usually works better than silence."),
            ("How should I prepare for my performance review?",
             "List three wins with evidence and one thing you want to learn next."),
        ),
    ),
    "movies": FillerTopic(
        slots={
            "film": (
                "a heist thriller", "an animated musical", "a space epic", "a slow-burn mystery",
                "a courtroom drama",
            ),
        },
        exchanges=(
            ("I watched {film} last night and the ending confused me.",
             "Endings like that are often left open on purpose so people keep talking."),
            ("Apparently {film} had a huge budget but flopped. Why does that happen?",
             "Big-budget films often flop when the marketing promises something the story can't "
             "deliver."),
            ("Can you recommend something like {film}?",
             "If you liked {film}, look at what the same writers did earlier; the tone is "
             "similar."),
            ("Is {film} worth seeing in a theater?",
             "For {film}, the big screen and the sound system really help."),
            ("Why do trailers give away so much of the plot?",
             "Studios test trailers, and audiences tend to respond to the ones that show more."),
            ("My friends want a movie night. Is {film} a good pick?",
             "{film} works well for a group as long as nobody minds a long running time."),
        ),
    ),
    "gardening": FillerTopic(
        slots={
            "plant": ("tomatoes", "zucchini", "lettuce", "blueberries", "runner beans", "peppers"),
        },
        exchanges=(
            ("The leaves on my {plant} are turning yellow. What am I doing wrong?",
             "Yellow leaves often mean too much water; let the soil dry out a little between "
             "waterings."),
            ("When should I plant {plant} outside?",
             "Wait until the last frost has passed before putting {plant} in the ground."),
            ("What's a good watering schedule for {plant}?",
             "Deep watering two or three times a week, early in the morning, keeps {plant} happy."),
            ("Do {plant} need full sun?",
             "Most {plant} want six hours of sun or more to do well."),
            ("Something keeps nibbling my {plant}. Any ideas?",
             "Slugs are the usual suspects; a ring of crushed eggshells or a beer trap helps."),
            ("Should I use compost or store-bought fertilizer?",
             "Compost feeds the soil slowly; a little fertilizer mid-season gives an extra push."),
        ),
    ),
    "tech": FillerTopic(
        slots={
            "gadget": ("phone", "laptop", "tablet", "router", "smart TV", "e-reader"),
        },
        exchanges=(
            ("My {gadget} has been really slow lately. Any ideas?",
             "Restart your {gadget}, clear some storage, and check for pending updates."),
            ("Should I update my {gadget} right away or wait?",
             "Waiting a week for early bug reports is a reasonable middle ground."),
            ("What's the easiest way to back up my {gadget}?",
             "Turn on automatic cloud backup for your {gadget} and keep one copy on a drive."),
            ("The Wi-Fi drops every evening. Could it be the router?",
             "Possibly. Try changing the channel and moving the router away from thick walls."),
            ("How do I make my {gadget} battery last longer?",
             "Lower the brightness and stop apps from refreshing in the background."),
            ("Is it worth paying for a password manager?",
             "Yes, a good password manager is one of the cheapest security upgrades there is."),
        ),
    ),
    "books": FillerTopic(
        slots={
            "book": (
                "a fantasy trilogy", "a detective novel", "a memoir", "a sci-fi classic",
                "a short story collection",
            ),
        },
        exchanges=(
            ("I'm reading {book} where the hero races a deadline to stop a flood. Worth finishing?",
             "If the middle drags, skim a chapter; stories like that usually pick up near the "
             "end."),
            ("How do I find more time to read?",
             "Keep a book by the bed and read ten pages before sleeping; it adds up fast."),
            ("Do audiobooks count as reading?",
             "They count. You still follow the story and the language; only the format changes."),
            ("Can you suggest something similar to {book}?",
             "Award shortlists in the same genre as {book} are a reliable place to start."),
            ("My book club picked {book}. How do I lead the discussion?",
             "Open with one question about a character's choice; people love arguing about "
             "motives."),
            ("Is it okay to abandon a book halfway?",
             "Absolutely. Life is short, and there is always another book waiting."),
        ),
    ),
    "fitness": FillerTopic(
        exchanges=(
            ("I want a workout schedule for three days a week.",
             "Try full-body sessions on alternating days, with a rest day in between."),
            ("Is running in the morning better than in the evening?",
             "Whenever you can be consistent is best; the timing matters less than the habit."),
            ("How much water should I drink on a long hike?",
             "Roughly half a liter an hour, more in the heat, and a salty snack helps."),
            ("My knees ache after squats. Should I stop?",
             "Lighten the load and check your form; if the pain persists, see a physio."),
            ("Does a daily dose of sunshine really help my mood?",
             "Morning light helps many people sleep and feel better, so a short walk is worth it."),
            ("What's a realistic goal for my first long race?",
             "Finishing comfortably is a great first goal; pace can come next time."),
        ),
    ),
    "home": FillerTopic(
        slots={
            "space": ("spare room", "hallway", "bathroom", "living room", "home office"),
        },
        exchanges=(
            ("I want to repaint the {space}. Any tips?",
             "Tape the edges, use a good primer, and go with two thin coats rather than one "
             "thick one."),
            ("How do I make the {space} feel bigger?",
             "Light walls, a large mirror and fewer, larger pieces of furniture open a space up."),
            ("Should I lease or buy a washing machine?",
             "Buying usually wins if you plan to stay more than a couple of years."),
            ("The {space} gets cold in winter. Cheap fixes?",
             "Seal the drafts around the windows and add a thick rug; both are cheap and "
             "effective."),
            ("What's the best way to organize the cables in the {space}?",
             "Cable sleeves and a few adhesive clips behind the furniture work wonders."),
            ("We're hosting a party on Saturday. What snacks are easy?",
             "Popcorn, pretzels and a veggie platter are easy crowd-pleasers."),
        ),
    ),
    "instruments": FillerTopic(
        slots={
            "instrument": ("guitar", "ukulele", "drums", "violin", "cello"),
        },
        exchanges=(
            ("I'm learning {instrument}. How often should I practice?",
             "Short daily practice beats one long session a week."),
            ("What's a good first song on {instrument}?",
             "Pick something slow that uses what you already know, then build up."),
            ("My fingers hurt after playing {instrument}. Is that normal?",
             "A little soreness is normal at first; take breaks and it fades in a couple of "
             "weeks."),
            ("Should I take lessons or learn {instrument} from videos?",
             "A few lessons early on catch bad habits that videos miss."),
            ("How do I stay motivated with {instrument}?",
             "Set a tiny goal each week, like one new song, and record yourself to hear progress."),
            ("Is it too late to learn {instrument} as an adult?",
             "Not at all; adults often progress quickly because they practice deliberately."),
        ),
    ),
    "science": FillerTopic(
        exchanges=(
            ("Why is the sky blue?",
             "Sunlight scatters off air molecules, and blue light scatters the most."),
            ("How do bees make honey?",
             "They collect nectar, add enzymes, and fan it with their wings until most of the "
             "water evaporates."),
            ("What causes the seasons?",
             "The tilt of Earth's axis changes how directly sunlight hits each hemisphere."),
            ("Why does bread go stale?",
             "Its starch recrystallizes and squeezes out moisture as the loaf sits."),
            ("How do noise-cancelling headphones work?",
             "They record outside sound and play an inverted wave that cancels much of it."),
            ("Why do onions make you cry?",
             "Cutting them releases a sulfur compound that irritates the eyes."),
        ),
    ),
}


# --- general questions ----------------------------------------------------------------------------
# What a user asks a chat model that needs nothing said before: how-to, facts about the world, advice,
# code, opinions. Many sit near the planted facts' topics (allergies, money, dates, contacts, medicine,
# tastes, appointments, numbers), and many say "I" or "my", as real questions do, so that neither the
# topic nor the pronoun alone tells them from a question about the user's own facts. Asked at the end of
# a conversation as probes of type ``general`` (no evidence, no answer): nothing should be paged in.
GENERAL_QUESTIONS: tuple[str, ...] = (
    # near allergies
    "What are the first signs of a food allergy?",
    "Is a peanut allergy something kids can grow out of?",
    "How does an EpiPen actually work?",
    "Which nuts are technically not nuts?",
    "Can you be allergic to cold weather?",
    "What is the difference between an allergy and an intolerance?",
    "Why do some people sneeze around cats?",
    # near money and budgets
    "How much should a decent laptop for students cost?",
    "What's a sensible way to set a monthly budget?",
    "Is it better to rent or buy a house in your thirties?",
    "How do I ask for a raise without sounding greedy?",
    "What is compound interest, in simple words?",
    "How much does a kitchen renovation usually cost?",
    "Which is cheaper for a holiday, Lisbon or Barcelona?",
    # near deadlines and paperwork
    "How do I stop procrastinating on big reports?",
    "What happens if you file your taxes late?",
    "How long does a passport renewal usually take?",
    "What makes a good pitch deck?",
    "How should a grant report be structured?",
    # near contacts and people
    "How do I write a polite email to a landlord about a broken heater?",
    "What should I ask a plumber before hiring them?",
    "How often should a parrot see a vet?",
    "What does an accountant do that tax software doesn't?",
    "How do I remember people's names better?",
    # near medicine
    "What does blood pressure medication do?",
    "Is it safe to take ibuprofen on an empty stomach?",
    "What's the difference between good and bad cholesterol?",
    "How do migraines differ from ordinary headaches?",
    "How should insulin be stored when travelling?",
    "Why do doctors tell you to take statins at night?",
    # near tastes
    "What colors go well with navy blue?",
    "What is a good name for a dog?",
    "Which flowers are easy to keep alive indoors?",
    "What's the difference between Thai and Vietnamese food?",
    "Who are some good jazz musicians for beginners?",
    "What music helps people concentrate?",
    # near appointments and routines
    "How often should I go to the dentist?",
    "What is a good age for a child to start piano lessons?",
    "Is yoga or pilates better for back pain?",
    "How do I run a weekly team meeting that people don't hate?",
    "What's the best time of day to exercise?",
    # near numbers and travel
    "How early should I get to the airport for an international flight?",
    "Why do hotels skip the thirteenth floor?",
    "How do flight numbers work?",
    "What should I do if I forget where I parked?",
    "How do gym lockers with codes work?",
    # general knowledge
    "What is the capital of Australia?",
    "How far is the moon from the Earth?",
    "Who wrote Pride and Prejudice?",
    "Why do cats purr?",
    "How many bones are in the human body?",
    "What causes thunder?",
    "When did the Berlin Wall fall?",
    # how-to
    "How do I get red wine out of a carpet?",
    "How do I fix a squeaky door?",
    "How do I iron a shirt without burning it?",
    "How do I tie a tie?",
    "What's the best way to learn a new language as an adult?",
    "How do I make a sourdough starter?",
    "How can I sleep better at night?",
    # code
    "How do I reverse a list in Python?",
    "What is the difference between a list and a tuple in Python?",
    "How do I undo my last git commit?",
    "Can you explain what a REST API is?",
    "How do I center a div in CSS?",
    # opinions
    "Is it worth learning to play chess as an adult?",
    "Are electric cars really better for the environment?",
    "What do you think makes a good friend?",
    "Should I learn to cook or just buy ready meals?",
)
GENERAL_PER_CONVERSATION = 6


def _phrasing_set(phrasing: str) -> tuple[dict[str, dict[str, tuple[str, ...]]], tuple[str, ...]]:
    phrasing = choose(Phrasing, phrasing, "phrasing")
    if phrasing == "dev":
        from .dev_phrasings import DEV_GENERAL, DEV_KINDS

        return DEV_KINDS, DEV_GENERAL
    if phrasing == "dev2":
        from .dev2_phrasings import DEV2_GENERAL, DEV2_KINDS

        return DEV2_KINDS, DEV2_GENERAL
    from .heldout_phrasings import HELDOUT_GENERAL, HELDOUT_KINDS

    return HELDOUT_KINDS, HELDOUT_GENERAL


def fact_kinds(phrasing: str = "tuning") -> tuple[FactKind, ...]:
    """The fact kinds with the templates of ``phrasing`` (a ``Phrasing``)."""
    if phrasing == "tuning":
        return FACT_KINDS
    kinds, _ = _phrasing_set(phrasing)
    return tuple(replace(kind, says=kinds[kind.name]["says"], asks=kinds[kind.name]["asks"],
                         updates=kinds[kind.name].get("updates", ()) if kind.updates else ())
                 for kind in FACT_KINDS)


def general_questions(phrasing: str = "tuning") -> tuple[str, ...]:
    """The general questions of ``phrasing`` (a ``Phrasing``)."""
    return GENERAL_QUESTIONS if phrasing == "tuning" else _phrasing_set(phrasing)[1]


# --- public API -----------------------------------------------------------------------------------


def generate_conversation(
    seed: int, n_turns: int = 160, revisiting: bool = False, conv_id: str | None = None,
    phrasing: str = "tuning", general: int = GENERAL_PER_CONVERSATION,
) -> Transcript:
    """A conversation of ``n_turns`` (rounded up to even) with planted facts and one probe each.

    Forward conversations ask every probe at the end; revisiting ones ask most probes mid-way,
    some turns after the fact, so paged-out facts get recalled during the conversation. ``general``
    general questions (``GENERAL_QUESTIONS``) are asked at the end as probes of type ``general``; they
    are drawn from a random stream of their own, so the conversation and its fact probes do not depend
    on how many there are.
    """
    n_turns += n_turns % 2
    if n_turns < MIN_TURNS:
        raise ValueError(f"n_turns must be at least {MIN_TURNS}, got {n_turns}")
    rng = random.Random(seed)
    facts = _draw_facts(rng, fact_kinds(phrasing))
    _place(rng, facts, n_turns)
    return Transcript(
        id=conv_id or f"synthetic-{seed}{'-revisiting' if revisiting else ''}",
        turns=_turns(rng, facts, n_turns),
        probes=_probes(rng, facts, n_turns, revisiting) + _general_probes(seed, phrasing, general),
        source="synthetic",
        meta={"seed": seed, "revisiting": revisiting, "phrasing": phrasing},
    )


def generate_dataset(
    n: int = 10, seed: int = 0, n_turns: int = 160, revisiting: bool | None = None,
    phrasing: str = "tuning", general: int = GENERAL_PER_CONVERSATION,
) -> list[Transcript]:
    """``n`` conversations from one seed; ``revisiting=None`` alternates forward and revisiting."""
    rng = random.Random(seed)
    return [
        generate_conversation(
            rng.randrange(2**32),
            n_turns,
            revisiting=i % 2 == 1 if revisiting is None else revisiting,
            conv_id=f"synthetic-{seed}-{i:03d}",
            phrasing=phrasing,
            general=general,
        )
        for i in range(n)
    ]


def mentions(text: str, answers: Iterable[str]) -> bool:
    """Whether ``text`` states any of ``answers`` as whole words, ignoring case and spacing.

    Whole words, so that a planted "12 units" is not found inside "112 units".
    """
    haystack = _normalise(text)
    return any(re.search(rf"(?<!\w){re.escape(_normalise(a))}(?!\w)", haystack) for a in answers)


# --- facts ----------------------------------------------------------------------------------------


@dataclass
class _Value:
    slots: dict[str, str]  # template fields; "v" is the value as written
    answers: list[str]


@dataclass
class _Statement:
    text: str
    value: _Value
    turn: int = -1  # the user turn that says it, once placed


@dataclass
class _Fact:
    kind: FactKind
    statements: list[_Statement]  # the original first, then its corrections


def _draw_facts(rng: random.Random, kinds: tuple[FactKind, ...] = FACT_KINDS) -> list[_Fact]:
    """One fact for each of 6-8 distinct types, so no two probes ask for the same kind of thing."""
    facts: list[_Fact] = []
    for fact_type in rng.sample(FACT_TYPES, rng.randint(*FACTS_PER_CONVERSATION)):
        kind = rng.choice([k for k in kinds if k.type == fact_type])
        facts.append(_Fact(kind, [_draw(rng, kind, kind.says, facts)]))
    return facts


def _draw(
    rng: random.Random, kind: FactKind, templates: tuple[str, ...], facts: list[_Fact]
) -> _Statement:
    """A statement of a new value that neither names nor is named by any other statement.

    That keeps each answer in exactly the turns that state it, so evidence is unambiguous and a
    correction never repeats the old value.
    """
    others = [s for fact in facts for s in fact.statements]
    maker = VALUE_MAKERS[str(kind.value[0])]
    while True:
        value = maker(rng, *kind.value[1:])
        said = _sentence(rng.choice(templates).format(**value.slots))
        text = f"{rng.choice(LEAD_INS)} {said}".strip()
        if not any(mentions(o.text, value.answers) or mentions(text, o.value.answers)
                   for o in others):
            return _Statement(text, value)


def _place(rng: random.Random, facts: list[_Fact], n_turns: int) -> None:
    """Spread facts and 1-2 corrections over the conversation, leaving the tail to filler.

    Corrections take slots in the second half, each after an earlier fact with another event
    between them.
    """
    n_updates = rng.randint(*UPDATES_PER_CONVERSATION)
    pairs = _spread(rng, 1, (n_turns - TAIL_TURNS) // 2, len(facts) + n_updates)
    update_slots = set(rng.sample(range(len(pairs) // 2, len(pairs)), n_updates))
    placed: list[_Fact] = []
    for slot, pair in enumerate(pairs):
        if slot in update_slots:
            before = 2 * pairs[slot - 1]
            earlier = [
                f for f in placed
                if f.kind.updates and len(f.statements) == 1 and f.statements[0].turn < before
            ]
            fact = rng.choice(earlier)
            fact.statements.append(_draw(rng, fact.kind, fact.kind.updates, facts))
        else:
            fact = facts[len(placed)]
            placed.append(fact)
        fact.statements[-1].turn = 2 * pair


def _spread(rng: random.Random, first: int, stop: int, k: int) -> list[int]:
    """``k`` increasing positions in ``[first, stop)``, one per equal stretch.

    So the facts land on many different pages rather than in one burst.
    """
    span = stop - first
    return [first + rng.randrange(i * span // k, (i + 1) * span // k) for i in range(k)]


# --- turns ----------------------------------------------------------------------------------------


def _turns(rng: random.Random, facts: list[_Fact], n_turns: int) -> list[Turn]:
    """User/assistant pairs: fact statements with a brief acknowledgement, filler elsewhere."""
    events = {s.turn: (s.text, i > 0) for fact in facts for i, s in enumerate(fact.statements)}
    banned = [a for fact in facts for s in fact.statements for a in s.value.answers]
    filler = _filler(rng, banned)
    turns: list[Turn] = []
    for index in range(0, n_turns, 2):
        if index in events:
            user, is_update = events[index]
            assistant = rng.choice(UPDATE_ACKS if is_update else ACKS)
        else:
            user, assistant = next(filler)
        turns += [Turn("user", user, index), Turn("assistant", assistant, index + 1)]
    return turns


def _filler(rng: random.Random, banned: list[str]) -> Iterator[tuple[str, str]]:
    """Endless runs of 3-6 exchanges on one topic.

    Exchanges that would state a planted value are skipped, so each answer has one home.
    """
    topic = ""
    while True:
        topic = rng.choice([name for name in FILLER_TOPICS if name != topic])
        exchanges, slots = FILLER_TOPICS[topic].exchanges, FILLER_TOPICS[topic].slots
        for user, assistant in rng.sample(exchanges, rng.randint(3, min(6, len(exchanges)))):
            fill = {name: rng.choice(pool) for name, pool in slots.items()}
            pair = (_sentence(user.format(**fill)), _sentence(assistant.format(**fill)))
            if not mentions(" ".join(pair), banned):
                yield pair


# --- probes ---------------------------------------------------------------------------------------


def _probes(rng: random.Random, facts: list[_Fact], n_turns: int, revisiting: bool) -> list[Probe]:
    """One probe per fact, sorted by when it is asked (end-of-conversation probes last)."""
    probes = [_probe(rng, fact) for fact in facts]
    if revisiting:
        for probe in probes:
            probe.at = _revisit_turn(rng, probe.evidence[0], n_turns)
    return sorted(probes, key=lambda p: (p.at is None, p.at or 0, p.evidence[0]))


def _probe(rng: random.Random, fact: _Fact) -> Probe:
    """The question for a fact; its answer and evidence are the newest statement's."""
    current = fact.statements[-1]
    return Probe(
        question=rng.choice(fact.kind.asks),
        answers=list(current.value.answers),
        evidence=[current.turn],
        type=fact.kind.type,
        extra={
            "kind": fact.kind.name,
            "stated": [s.turn for s in fact.statements],
            "old_answers": [a for s in fact.statements[:-1] for a in s.value.answers],
        },
    )


def _general_probes(seed: int, phrasing: str, n: int) -> list[Probe]:
    """``n`` distinct general questions, asked at the end; drawn from their own stream (see above)."""
    pool = general_questions(phrasing)
    rng = random.Random(f"general:{phrasing}:{seed}")
    return [Probe(question=q, answers=[], evidence=[], type=GENERAL_PROBE)
            for q in rng.sample(pool, min(n, len(pool)))]


def _revisit_turn(rng: random.Random, evidence: int, n_turns: int) -> int | None:
    """An assistant turn at least ``REVISIT_GAP`` after the fact; None (at the end) if none fits."""
    first, last = (evidence + REVISIT_GAP) | 1, n_turns - 3
    return rng.randrange(first, last + 1, 2) if first <= last else None


# --- values ---------------------------------------------------------------------------------------
# Each maker returns the template slots ("v": the value as written) and every accepted answer.


def _pool_value(rng: random.Random, pool: str) -> _Value:
    written, *others = rng.choice(WORD_POOLS[pool])
    return _Value({"v": written}, [written, *others])


def _money(rng: random.Random, low: int, high: int, step: int) -> _Value:
    amount = rng.randrange(low, high + 1, step)
    forms = _unique([f"${amount:,}", f"{amount:,}", str(amount), f"${amount}"])
    return _Value({"v": forms[0]}, forms)


def _date(rng: random.Random) -> _Value:
    month, day = rng.choice(MONTHS), rng.randint(1, 28)
    nth = _ordinal(day)
    forms = _unique([
        f"{month} {day}", f"{month} {nth}", f"{day} {month}", f"{nth} of {month}",
        f"{month[:3]} {day}",
    ])
    return _Value({"v": rng.choice(forms[:3])}, forms)


def _clock(rng: random.Random) -> _Value:
    hour, minute = rng.randint(7, 19), rng.choice((0, 0, 15, 30, 45))
    h12, half = hour % 12 or 12, "am" if hour < 12 else "pm"
    if minute:
        forms = [f"{h12}:{minute} {half}", f"{h12}:{minute}{half}", f"{hour:02d}:{minute}"]
    else:
        forms = [
            f"{h12}{half}", f"{h12} {half}", f"{h12}:00 {half}", f"{h12}:00{half}", f"{hour:02d}:00"
        ]
    return _Value({"v": rng.choice(forms[:2]), "day": rng.choice(WEEKDAYS)}, forms)


def _person(rng: random.Random) -> _Value:
    first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
    slots = {
        "v": f"{first} {last}",
        "phone": f"555-{rng.randint(100, 999):04d}",
        "email": f"{first.lower()}.{last.lower()}@{rng.choice(MAIL_DOMAINS)}",
    }
    return _Value(slots, [f"{first} {last}", first, last])


def _drug(rng: random.Random, pool: str) -> _Value:
    value = _pool_value(rng, pool)
    value.slots["dose"] = rng.choice(DOSES)
    return value


def _units(rng: random.Random) -> _Value:
    units = rng.randint(6, 30)
    return _Value({"v": f"{units} units"}, [f"{units} units", f"{units} unit"])


def _room(rng: random.Random) -> _Value:
    room = rng.randint(2, 9) * 100 + rng.randint(1, 39)
    return _Value({"v": str(room)}, [str(room), f"room {room}"])


def _locker(rng: random.Random) -> _Value:
    locker = rng.randint(100, 399)
    return _Value({"v": str(locker)}, [str(locker), f"locker {locker}"])


def _flight(rng: random.Random) -> _Value:
    airline, number = rng.choice(AIRLINES), rng.randint(100, 999)
    forms = [f"{airline} {number}", f"{airline}{number}", str(number)]
    return _Value({"v": forms[0]}, forms)


def _spot(rng: random.Random) -> _Value:
    level, number = rng.choice(PARKING_LEVELS), rng.randint(1, 60)
    forms = [f"{level}{number}", f"{level}-{number}", f"{level} {number}"]
    return _Value({"v": forms[0]}, forms)


VALUE_MAKERS = {
    "pool": _pool_value, "money": _money, "date": _date, "clock": _clock, "person": _person,
    "drug": _drug, "units": _units, "room": _room, "locker": _locker, "flight": _flight,
    "spot": _spot,
}


# --- text -----------------------------------------------------------------------------------------


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _normalise(text: str) -> str:
    return " ".join(text.lower().split())


def _ordinal(day: int) -> str:
    suffix = "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def _unique(forms: list[str]) -> list[str]:
    return list(dict.fromkeys(forms))
