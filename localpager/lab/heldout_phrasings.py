"""Held-out phrasings for the synthetic generator: new words for the same planted facts.

``synthetic.FACT_KINDS`` says, asks about and corrects every fact kind with a few templates, and the
recall settings were chosen on those templates. This module gives every kind a second, independent
set of templates (``HELDOUT_KINDS``) and a second pool of general questions (``HELDOUT_GENERAL``),
so an evaluation can measure recall on wording the system has never been tuned on
(``synthetic.fact_kinds("heldout")``, ``synthetic.general_questions("heldout")``).

It is never used for tuning: nobody who chooses settings reads it, and no setting may be chosen on
its numbers. If it is ever tuned on, it stops being held out and a new set has to be written.

It was written separately from the tuning templates, by a helper session that had not worked on the
recall system, under these rules:

- Each kind in ``HELDOUT_KINDS`` has the fields of its tuning kind and only those: ``says`` and
  ``updates`` templates hold ``{v}`` (the value) exactly once, plus ``{day}`` for the schedule
  kinds, ``{dose}`` for the drug kinds, ``{phone}`` for the landlord and plumber, ``{email}`` for
  the vet and the accountant. ``asks`` templates hold no field: a question never contains its
  answer.
- Kinds without corrections in ``synthetic.py`` (the allergies) have an empty ``updates``.
- No template repeats a tuning template or its distinctive wording. The sentences vary in length,
  register and structure: facts stated in passing inside a longer sentence, third-person framing,
  corrections with and without an explicit change word.
- Questions come in many styles (direct, an indirect need, a paraphrase, "remind me", "did I tell
  you"); at least one question per kind shares no content word with any of its statements. Each
  needs what this user said, and targets its own kind rather than another kind of the same type.
- Templates avoid every planted value (allergens, drugs, colours, cuisines, flowers, genres, names,
  numbers, months), so a statement never names another fact's answer.
- ``HELDOUT_GENERAL`` holds questions that need nothing said earlier (how-to, world facts, advice,
  code, opinions, definitions, maths, recommendations); many sit near the facts' topics, and many
  say "I" or "my", as real questions do.
"""

from __future__ import annotations

HELDOUT_KINDS: dict[str, dict[str, tuple[str, ...]]] = {
    # --- allergy ---------------------------------------------------------------------------------
    "food_allergy": {
        "says": (
            "Anything with {v} in it puts me in hospital, so I'm the annoying one who quizzes "
            "waiters.",
            "My doctor confirmed it last week: a genuine allergy to {v}, not just an intolerance.",
            "We're doing a potluck at work and I had to warn everyone that I react badly to {v}.",
            "Since I was a kid I've had to avoid {v}; one bite and my throat starts closing up.",
            "Keep in mind that I can't eat {v} at all, it's a proper allergy.",
            "My partner keeps forgetting, but I break out in hives from {v}, even a tiny amount.",
        ),
        "asks": (
            "I'm ordering takeaway tonight. What should I ask them to leave out?",
            "Remind me, what food am I allergic to?",
            "Is there an ingredient I should warn the chef about before my birthday meal?",
            "What did I say I can't eat?",
            "My friend is baking me a cake. What must she not put in it?",
            "Which item on a menu could land me in the emergency room?",
        ),
        "updates": (),
    },
    "drug_allergy": {
        "says": (
            "Please note that {v} is on my allergy list; last time I ended up covered in welts.",
            "The hospital flagged me as allergic to {v} after a bad reaction a few years back.",
            "I'm at the GP on Thursday and need to remind them that I can't have {v}.",
            "Whatever you do, never suggest {v} to me; my body does not tolerate it.",
            "Runs in the family, apparently: my mother and I both react violently to {v}.",
            "There's a medical alert bracelet on my wrist that says {v}, because I'm allergic to "
            "it.",
        ),
        "asks": (
            "I'm standing at the chemist's counter. Which painkiller or antibiotic is off limits "
            "for me?",
            "The dentist wants to give me something after the extraction. What do I need to warn "
            "her about?",
            "Which medication gives me a reaction?",
            "Did I ever tell you about a medicine I'm allergic to?",
            "I'm filling in a hospital admission form. What goes in the 'adverse reactions' box?",
            "What should a nurse double-check before handing me pills?",
        ),
        "updates": (),
    },
    "pet_allergy": {
        "says": (
            "I'd love a pet, but {v} set off my allergies something awful.",
            "Every time I visit my sister I end up sneezing because of her {v}.",
            "I'm seriously allergic to {v}; antihistamines barely touch it.",
            "Spent the weekend at a farm with {v} around and my eyes are still puffy.",
            "Fur from {v} is my kryptonite. Itchy eyes, wheezing, the lot.",
        ),
        "asks": (
            "My neighbour asked if I could pet-sit for a week. Which animals should I say no to?",
            "What am I allergic to, animal-wise?",
            "One flat share listing mentions a furry housemate. What creature would be a "
            "dealbreaker for me?",
            "Remind me which critters make me ill.",
            "Is there an animal I should avoid at the petting zoo?",
            "If my kid begs for a furry friend, which kind is out of the question?",
        ),
        "updates": (),
    },
    # --- budget ----------------------------------------------------------------------------------
    "laptop_budget": {
        "says": (
            "I'm shopping for a new laptop and I really can't go past {v}.",
            "My partner thinks I'll overspend, but the new laptop has a hard limit of {v}.",
            "Whatever machine I pick for work, {v} is the most I'll pay.",
            "Laptop shopping this weekend; I've got {v} to play with and no more.",
            "Honestly, anything over {v} for a laptop is out of the question for me.",
        ),
        "asks": (
            "How much did I say I could spend on the new computer?",
            "I found a nice ultrabook on sale. What's my price limit again?",
            "Remind me of my spending limit for the laptop.",
            "The salesperson is asking what range I'm looking at for a portable PC. What do I "
            "tell him?",
            "Did I give you a figure for the computer purchase?",
            "Is there a maximum I set for the MacBook-or-whatever I'm getting?",
        ),
        "updates": (
            "Scratch that, the laptop budget is {v} now.",
            "I've rethought it: I'll spend up to {v} on the laptop.",
            "For the laptop, {v} is my real limit.",
            "My tax refund came through, so the laptop can be {v}.",
        ),
    },
    "trip_budget": {
        "says": (
            "For the trip to Lisbon I'm allowing myself {v}, flights and hotel included.",
            "I've been saving up and the Lisbon holiday gets {v}, not a euro more.",
            "My sister and I worked it out: {v} is what Lisbon can cost us altogether.",
            "Lisbon is happening! I've capped the whole thing at {v}.",
            "I don't want to come back broke from Lisbon, so {v} is the limit for everything.",
        ),
        "asks": (
            "What's my total for the Lisbon holiday again?",
            "Remind me how much I budgeted for the Portugal getaway.",
            "I'm pricing guesthouses near the Alfama. How much did I say the whole trip could "
            "cost?",
            "What's the spending limit on my upcoming vacation?",
            "Did I tell you how much I'm putting aside for my travels in Portugal?",
            "How much have I got for pastel de nata and tram rides?",
        ),
        "updates": (
            "Scratch what I said about Lisbon, the budget's {v} now.",
            "We found cheaper flights, so Lisbon is {v} in total from here.",
            "For Lisbon, let's say {v} all told.",
        ),
    },
    "kitchen_budget": {
        "says": (
            "We're redoing the kitchen and the absolute limit is {v}.",
            "The contractor quoted high, but I told him the kitchen job can't go over {v}.",
            "I've put {v} aside for the new kitchen, and that includes appliances.",
            "My husband and I agreed the kitchen redo gets {v}, full stop.",
            "Kitchen news: the money we have for it is {v}, total.",
        ),
        "asks": (
            "How much did we agree to spend on redoing the kitchen?",
            "A builder is quoting for new worktops and a sink. What's my upper limit?",
            "What did I say we could put into the cooking-space makeover?",
            "Remind me what we set for the kitchen project.",
            "How much is there for cupboards, tiles and the rest of that room?",
            "Did I mention a number for the renovation downstairs where we cook?",
        ),
        "updates": (
            "The inspection found problems, so the kitchen budget went up to {v}.",
            "New kitchen number: {v}.",
            "Revised figure for the kitchen: {v}.",
        ),
    },
    "rent_budget": {
        "says": (
            "I'm flat hunting and anything over {v} a month is too much.",
            "The most I can put toward rent each month is {v}.",
            "Looking at apartments again. My limit is {v} monthly, bills included.",
            "Wherever I end up living, I can pay {v} a month and not a penny more.",
            "After tax and savings, {v} per month is what's left for housing.",
        ),
        "asks": (
            "How much rent did I say I could pay?",
            "This two-bed is listed at a good price. What's my monthly limit again?",
            "What can I spend on a place to live each month?",
            "Remind me of my housing budget.",
            "What should I put in the 'max price' filter on the property site?",
            "Did I tell you how much I can afford for an apartment?",
            "What's the priciest place I could sign for?",
        ),
        "updates": (
            "Forget the old figure, my rent limit is {v} now.",
            "New job, new rent limit: {v} a month.",
            "I can do {v} a month for rent from now on.",
        ),
    },
    # --- deadline --------------------------------------------------------------------------------
    "grant_deadline": {
        "says": (
            "The final report for my research grant is due {v}.",
            "I've got until {v} to get the grant report to the foundation.",
            "The grant report has to be submitted on {v} and I've barely started.",
            "The funding body expects my progress report by {v}, so that's my focus.",
            "My grant's reporting deadline is {v}; miss it and we lose the next instalment.",
        ),
        "asks": (
            "When is my grant report due?",
            "How long do I have to finish the thing for the funding people?",
            "What date did I give you for the research report?",
            "Remind me when the foundation needs my paperwork.",
            "When do the people paying for my study need to hear from me?",
            "Which day is the cutoff for my research funding report?",
        ),
        "updates": (
            "The funders gave us more time; the grant report is due {v}.",
            "Update on the grant report: the new date is {v}.",
            "The grant report is due {v}, not the date I told you.",
        ),
    },
    "tax_deadline": {
        "says": (
            "If my tax return isn't filed by {v}, I get a penalty.",
            "Taxes this year are due {v}, and I haven't even opened the envelope.",
            "The tax office wants everything from me by {v}.",
            "I'm filing on my own this year and the cutoff is {v}.",
            "Deadline for my taxes: {v}. Writing it here so I don't forget.",
        ),
        "asks": (
            "When do I need to file my taxes?",
            "What's the last day for my return this year?",
            "How long have I got before the taxman wants my forms?",
            "Did I mention when my tax stuff is due?",
            "By when must my yearly income declaration be in?",
        ),
        "updates": (
            "Tax deadline moved to {v}.",
            "I asked for more time, and the tax return isn't due until {v}.",
            "Turns out the taxes are due {v}; I misread the letter.",
        ),
    },
    "pitch_deadline": {
        "says": (
            "The Hartley pitch needs to be done and dusted by {v}.",
            "My boss wants the slides for Hartley finished by {v}.",
            "We're presenting to Hartley and the deck is due {v}.",
            "The Hartley account people expect our proposal on {v}.",
            "I've got until {v} to finish the Hartley presentation, and it's a big one.",
        ),
        "asks": (
            "When is the Hartley deck due?",
            "How much time do I have for the client slides?",
            "What's the due date for the new-business presentation?",
            "Remind me when I need to show the prospective client our pitch.",
            "When do I have to hand over the PowerPoint for that big prospect?",
            "What did I say the date for the pitch was?",
            "When do I have to be ready to wow that prospective client?",
        ),
        "updates": (
            "Hartley wants it earlier now, so the deck is due {v}.",
            "The Hartley deadline slipped to {v}.",
            "Hartley deck: {v}, they confirmed this morning.",
        ),
    },
    "passport_deadline": {
        "says": (
            "I have to send in my passport renewal by {v}, or I can't travel this summer.",
            "The passport application needs to be in by {v}.",
            "My passport is about to expire and the renewal deadline is {v}.",
            "The embassy's cutoff for my passport paperwork is {v}.",
            "Passport forms, photos and all, are due {v}.",
        ),
        "asks": (
            "When do I need to get my passport stuff in?",
            "By when do I have to apply for a new travel document?",
            "Did I say when the renewal of my ID for going abroad is due?",
            "What's the deadline for sending off those passport photos?",
            "When is the consulate expecting my application?",
            "When's the last day to sort out my new ID for flying abroad?",
        ),
        "updates": (
            "New passport deadline: {v}.",
            "I misread the form; the passport renewal is due {v}.",
            "They pushed my passport paperwork back to {v}.",
        ),
    },
    # --- contact ---------------------------------------------------------------------------------
    "landlord_contact": {
        "says": (
            "The flat is owned by {v}; if I need them, it's {phone}.",
            "For reference, my landlord's name is {v} and the phone number is {phone}.",
            "I rent from {v}. Number's {phone}, in case the boiler acts up again.",
            "Saving this here: landlord {v}, {phone}.",
            "Anything about the apartment goes through {v}, who owns it, on {phone}.",
        ),
        "asks": (
            "Who owns the place I rent?",
            "I want to ask about renewing my tenancy. Who do I ring?",
            "What's my landlord's number?",
            "Who should I tell that I'm moving out?",
            "Did I give you the property owner's contact details?",
            "Who do I pay my rent to?",
        ),
        "updates": (
            "We've got a new landlord, {v}, on {phone}.",
            "The flat was sold; {v} owns it now, phone {phone}.",
            "From next month the rent goes to {v}, reachable on {phone}.",
        ),
    },
    "plumber_contact": {
        "says": (
            "Our plumber is {v}; call {phone} if the pipes act up.",
            "{v} fixed our boiler last winter and was great. Number: {phone}.",
            "If the toilet overflows again, {v} is who we call, {phone}.",
            "Keep this: plumber, {v}, {phone}. Reliable and cheap.",
            "A neighbour recommended {v} for plumbing work, and they're on {phone}.",
        ),
        "asks": (
            "The shower drain is blocked solid. Who do I ring?",
            "What's the plumber's number?",
            "Who's our go-to person for pipe problems?",
            "Remind me who sorts out our plumbing.",
            "My washing machine hose split and there's water everywhere. Who should come fix it?",
            "Did I give you the details of someone good with taps and drains?",
        ),
        "updates": (
            "Our plumber moved away, so now we use {v}, {phone}.",
            "New plumber: {v}, {phone}.",
            "I'm done with the old plumber; {v} is much better, {phone}.",
        ),
    },
    "vet_contact": {
        "says": (
            "Our parrot's vet is {v}; the best way to reach them is {email}.",
            "{v} is the avian vet who sees our parrot. Email: {email}.",
            "When the parrot's unwell we email {v} at {email}.",
            "Noting the bird doctor's details: {v}, {email}.",
            "We finally found a vet who knows parrots, {v}, and they answer at {email}.",
        ),
        "asks": (
            "Our parrot has stopped eating. Who do I get in touch with?",
            "What's the email for the bird vet?",
            "Who looks after our parrot's health?",
            "Who's the veterinarian for our talking bird?",
            "Did I tell you which animal clinic person handles the bird?",
            "Who should I write to about the bird's cracked beak?",
            "Who do we contact when our squawking companion seems poorly?",
        ),
        "updates": (
            "The parrot's got a new vet: {v}, {email}.",
            "We're taking the parrot to {v} from now on; write to {email}.",
            "Our old bird vet retired, so it's {v} now, {email}.",
        ),
    },
    "accountant_contact": {
        "says": (
            "{v} handles my accounts; the best contact is {email}.",
            "I've hired {v} to do my bookkeeping, email {email}.",
            "For anything financial, my accountant {v} is at {email}.",
            "Jotting down my accountant's details: {v}, {email}.",
            "The person who sorts out my finances every year is {v}, {email}.",
        ),
        "asks": (
            "Who does my accounts?",
            "I've got a pile of invoices and bank statements. Who should they go to?",
            "What's my accountant's email?",
            "Who's my bookkeeper?",
            "The tax office sent me a scary letter. Who should I forward it to?",
            "Remind me who I pay to handle my money paperwork.",
        ),
        "updates": (
            "New accountant this year: {v}, {email}.",
            "I've moved my books over to {v}; email is {email}.",
            "{v} is taking over my accounts, contact {email}.",
        ),
    },
    # --- medical ---------------------------------------------------------------------------------
    "blood_pressure_drug": {
        "says": (
            "I'm on {dose} of {v} daily for high blood pressure.",
            "My blood pressure's been high, so the GP started me on {v}, {dose} with breakfast.",
            "One {v} tablet a day, {dose}, for my blood pressure.",
            "My pressure pill is {v}, {dose}, and I'm not supposed to skip it.",
            "Since my last checkup showed high readings, I take {v} at {dose}.",
        ),
        "asks": (
            "What's my blood pressure medication called?",
            "The new doctor asked what I take for high BP. What do I tell her?",
            "Which pill keeps my pressure readings down?",
            "Remind me what the GP put me on for hypertension.",
            "A cold remedy says to check with a doctor if you're treated for raised blood "
            "pressure. What am I on?",
            "Which of my daily tablets is the one for my pressure?",
        ),
        "updates": (
            "The GP swapped my blood pressure tablet for {v}, {dose}.",
            "New blood pressure med: {v}, {dose}.",
            "For the blood pressure it's {v} {dose} from here on.",
        ),
    },
    "cholesterol_drug": {
        "says": (
            "My cholesterol was high, so now I take {v}, {dose}, before bed.",
            "The statin I'm on is {v}, {dose} daily.",
            "For the cholesterol the doctor put me on {dose} of {v}.",
            "I've been taking {v} ({dose}) for about a year to bring my LDL down.",
            "Cholesterol tablets: {v}, {dose}. That's my nightly routine.",
        ),
        "asks": (
            "What do I take for my cholesterol?",
            "Grapefruit juice apparently interacts with some statins. Which one am I on?",
            "Which medicine is supposed to lower my bad fats?",
            "Remind me what I was prescribed for my blood lipids.",
            "What's the pill I swallow at bedtime for my arteries?",
            "Did I tell you what my cholesterol medication is?",
        ),
        "updates": (
            "Switched statins, now on {v}, {dose}.",
            "My cholesterol pill is {v} {dose} now.",
            "The doctor's replaced my cholesterol tablet with {v}, {dose}.",
        ),
    },
    "migraine_drug": {
        "says": (
            "My migraine medication is {v}, {dose}, and it only works if I take it early.",
            "When I feel one of my migraines coming on, I take {dose} of {v}.",
            "The neurologist gave me {v} for migraines; {dose} per attack.",
            "{v} at {dose} is what gets me through a migraine.",
            "I keep {v}, {dose}, in my bag in case a migraine starts.",
        ),
        "asks": (
            "What do I take for my migraines?",
            "I can feel the aura starting. Which tablet should I grab?",
            "My head is pounding and the lights hurt. What's my usual medicine for this?",
            "Remind me of my migraine pill's name.",
            "What was I prescribed for those splitting headaches?",
        ),
        "updates": (
            "The old migraine pills stopped working, so I'm on {v}, {dose}.",
            "New migraine medicine: {v}, {dose}.",
            "For migraines I use {v}, {dose}, from here on.",
        ),
    },
    "insulin_dose": {
        "says": (
            "Before my evening meal I take {v} of insulin.",
            "My dinner-time insulin is {v}.",
            "The diabetes nurse set my evening insulin at {v}.",
            "I do {v} of fast-acting insulin with my evening meal.",
            "Evening insulin: {v}. Mornings are different, but that's the night one.",
        ),
        "asks": (
            "How much insulin do I take in the evening?",
            "It's dinner time. How many units should I inject?",
            "What's my night-time dose for my diabetes?",
            "How much of the injection do I need with tonight's food?",
            "Remind me of my insulin amount before I eat tonight.",
            "Did I say how big my jab is at teatime?",
        ),
        "updates": (
            "The diabetes clinic adjusted my evening insulin to {v}.",
            "From tonight I'm taking {v} of insulin at dinner.",
            "Correction: my dinner insulin should be {v}.",
        ),
    },
    # --- preference ------------------------------------------------------------------------------
    "favorite_color": {
        "says": (
            "I've always been drawn to {v}; it's easily my favourite colour.",
            "Half my wardrobe is {v}, which tells you my favorite color.",
            "If you ever need to pick a color for me, go with {v}.",
            "There's no colour I like more than {v}.",
            "Everyone jokes that my whole flat is {v}, and they're right, it's my colour.",
        ),
        "asks": (
            "What's my favorite color?",
            "My sister is knitting me a scarf. Which yarn should she buy?",
            "I'm repainting the bedroom. Which colour did I say I love?",
            "If someone were choosing a mug for me, what should it look like?",
            "What colour did I tell you I like best?",
            "Which phone case would suit my taste?",
        ),
        "updates": (
            "I'm over my old favourite colour; it's {v} these days.",
            "Honestly, {v} is my colour now.",
            "Forget what I said about colours, I'm obsessed with {v}.",
        ),
    },
    "favorite_cuisine": {
        "says": (
            "If I could eat one kind of food forever, it'd be {v}.",
            "My favorite restaurants are all {v}; I just love that food.",
            "{v} cooking is my absolute favourite.",
            "Give me {v} food over anything else, any night of the week.",
            "My friends know that {v} is my pick whenever we eat out.",
        ),
        "asks": (
            "Which cuisine do I like most?",
            "Where should we go for dinner on my birthday?",
            "What should I order when I can't decide on takeaway?",
            "What type of food did I say I love?",
            "My friend wants to make me something special. What kind of dishes should she try?",
            "Which cookbook would I enjoy as a gift?",
        ),
        "updates": (
            "I've gone off my old favourite; {v} is the best now.",
            "Had an amazing meal last night, and {v} is my new favourite cuisine.",
            "{v} is my go-to these days.",
        ),
    },
    "favorite_flower": {
        "says": (
            "My favourite flowers are {v}; they make any room feel happy.",
            "Whenever I buy myself flowers, it's {v}.",
            "{v} are the flowers I'd pick every single time.",
            "I planted {v} all along the fence because they're my favourites.",
            "There's nothing prettier than {v}, in my opinion.",
        ),
        "asks": (
            "What are my favorite flowers?",
            "My partner wants to surprise me with something from the florist. What should he get?",
            "What should I grow in the window box to cheer myself up?",
            "What kind of arrangement would make my day?",
            "Remind me which flowers I like best.",
        ),
        "updates": (
            "My favourite flowers are {v} now.",
            "Switched allegiance: {v} are the flowers for me these days.",
            "After that garden tour, {v} became my favourite flower.",
        ),
    },
    "favorite_music": {
        "says": (
            "{v} is my favourite kind of music, no contest.",
            "My work playlist is all {v}; it's the music I love most.",
            "If there's {v} on, I'm happy.",
            "My favorite genre has to be {v}.",
            "Put on {v} and I'll be in a good mood all day.",
        ),
        "asks": (
            "What's my favorite type of music?",
            "Which festival should I get tickets for?",
            "What genre did I say I love?",
            "Make me a playlist. What style should it be?",
            "Which radio station would I like?",
            "What should the band play at my anniversary dinner?",
        ),
        "updates": (
            "Can't get enough of {v} lately; it's replaced everything else I listen to.",
            "{v} has taken over my playlists lately.",
            "New favourite genre: {v}.",
        ),
    },
    # --- schedule --------------------------------------------------------------------------------
    "dentist_visit": {
        "says": (
            "I've got the dentist on {day} at {v}.",
            "Dentist appointment booked: {day}, {v}.",
            "The dental surgery confirmed my check-up for {day} at {v}.",
            "Can't do {day} at {v}, that's my dentist slot.",
            "My teeth cleaning is {day} at {v}, ugh.",
        ),
        "asks": (
            "When is my dentist appointment?",
            "What time do I need to be at the dental clinic?",
            "When am I getting my teeth looked at?",
            "What time is that appointment for my fillings?",
            "When do I have to leave work to see the hygienist?",
        ),
        "updates": (
            "The dentist rescheduled me to {day} at {v}.",
            "Dentist is {day}, {v}.",
            "I swapped my dentist slot for {day} at {v}.",
        ),
    },
    "piano_lesson": {
        "says": (
            "My daughter has piano on {day}s at {v}, so I'm the taxi.",
            "Every {day} at {v} I take my daughter to her piano teacher.",
            "Our girl's piano class is {day} at {v}, every week.",
            "{day} at {v} is piano time for my daughter, so I'm busy then.",
            "Her teacher could only fit my daughter in on {day}s at {v}, so piano is sorted.",
        ),
        "asks": (
            "When is my daughter's piano lesson?",
            "What time does my kid's piano start?",
            "When are my daughter's music lessons?",
            "Remind me what time the piano is for my daughter.",
            "When must I be free to take my child to her lesson?",
            "When should I drive the kiddo to her music instructor?",
        ),
        "updates": (
            "Piano's been bumped to {day}s at {v} for my daughter.",
            "From next week my daughter's piano is {day} at {v}.",
            "New piano time for my daughter: {day}, {v}.",
        ),
    },
    "yoga_class": {
        "says": (
            "Yoga is {day}s at {v}, and I never miss it.",
            "My yoga class is on {day} at {v} at the studio round the corner.",
            "Every {day} at {v} I'm at yoga, phone off.",
            "I signed up for a yoga class, {day} at {v}.",
            "{day} at {v} is my yoga time, so don't let me book anything then.",
        ),
        "asks": (
            "What time is my yoga class?",
            "When's my weekly vinyasa?",
            "Remind me when I'm at the studio each week.",
            "What time should I leave the house for my flow class?",
            "When's yoga?",
        ),
        "updates": (
            "Yoga switched to {day}s at {v}.",
            "From next week yoga is {day} at {v}.",
            "I'm doing yoga {day} at {v} instead.",
        ),
    },
    "team_sync": {
        "says": (
            "Our team meeting is {day}s at {v}, every week.",
            "Every week the whole team gets on a call {day} at {v}.",
            "I can't book anything {day} at {v}; that's the team sync.",
            "Standing meeting with my team: {day}, {v}.",
            "My manager runs a team check-in every {day} at {v}.",
        ),
        "asks": (
            "When is my team meeting?",
            "What time is the weekly call with my colleagues?",
            "When's our recurring check-in?",
            "Remind me when the standup with my coworkers is.",
            "I want a doctor visit that doesn't clash with work. When is that weekly gathering?",
        ),
        "updates": (
            "The team meeting moved to {day} at {v}.",
            "Sync with the team is {day}s at {v} going forward.",
            "My manager wants the weekly team call on {day}, {v}.",
        ),
    },
    # --- number ----------------------------------------------------------------------------------
    "hotel_room": {
        "says": (
            "Top floor for me this time: room {v}, with a view over the water.",
            "Checked in! My room is {v}.",
            "Hotel room for this trip is {v}.",
            "The hotel gave me room {v}, right by the lift.",
            "If you need to know, I'm sleeping in room {v} this week.",
        ),
        "asks": (
            "What's my hotel room number?",
            "Which room am I staying in?",
            "Room service is asking where to deliver. What do I tell them?",
            "I've forgotten which door is mine at the hotel. What number was it?",
            "What number should I give reception for my stay?",
        ),
        "updates": (
            "They gave me a new room, {v}.",
            "I'm in room {v} now; the shower in the other one was broken.",
            "Room swap: I'm in {v}.",
        ),
    },
    "gym_locker": {
        "says": (
            "They gave me a wristband key at the gym; it opens locker {v}.",
            "I got locker {v} at the gym, near the showers.",
            "Locker {v} is mine at the gym; I keep my towel there.",
            "My trainers and towel live in locker {v} at the gym.",
            "Remember for me: gym locker {v}.",
        ),
        "asks": (
            "What's my locker number again?",
            "Which locker is mine at the gym?",
            "Which compartment did I rent at the health club?",
            "Remind me of my locker.",
            "What number do I look for in the changing room?",
        ),
        "updates": (
            "Got a new gym locker: {v}.",
            "Had to give up my old locker; I've got {v} at the gym these days.",
            "The gym shuffled everyone around and I'm at locker {v}.",
        ),
    },
    "flight_number": {
        "says": (
            "I'm flying out on {v} on Friday.",
            "Friday's the big day, I'm on {v} first thing.",
            "Booked! It's {v}, departing Friday.",
            "The flight I'm on is {v}.",
            "Just got the confirmation email for {v} on Friday.",
        ),
        "asks": (
            "What's my flight number?",
            "Which flight am I on?",
            "What do I type into the tracker app to see if I'm delayed?",
            "Which flight should my friend check for my arrival time?",
            "Remind me of my flight.",
            "What should I tell the check-in desk I'm travelling on?",
        ),
        "updates": (
            "My flight got cancelled, so I'm on {v} instead.",
            "New flight: {v}.",
            "Rebooked onto {v}, same day.",
        ),
    },
    "parking_spot": {
        "says": (
            "Parked up in {v}, by the pay machine.",
            "The car is in space {v}.",
            "Car's in {v}, near the lifts.",
            "I've got parking spot {v} for the week.",
            "Note to self: parked at {v} in the multi-storey.",
        ),
        "asks": (
            "Where did I park?",
            "Where's my car?",
            "Which bay is my car in?",
            "I'm back at the car park and can't remember where I left the car. Help?",
            "What was my parking spot?",
            "Which level and row should I head to for my vehicle?",
        ),
        "updates": (
            "Moved the car to {v}.",
            "I had to re-park; the car's in {v} now.",
            "After lunch I shifted the car over to {v}.",
        ),
    },
}

HELDOUT_GENERAL: tuple[str, ...] = (
    # near allergies
    "What are the symptoms of a shellfish allergy?",
    "Can an adult suddenly develop a food allergy?",
    "What's the difference between anaphylaxis and a normal allergic reaction?",
    "Are there dog breeds that are better for people with allergies?",
    "Can you be allergic to ibuprofen but fine with paracetamol?",
    "Is hay fever the same thing as a pollen allergy?",
    "How do I clean my house if a guest is allergic to cats?",
    "What can I bake for a nut-free school bake sale?",
    # near money and budgets
    "Is it better to buy a laptop or a desktop for video editing?",
    "How much RAM do I need in a laptop for programming?",
    "What's the 50/30/20 rule for budgeting?",
    "What share of my income should go on rent?",
    "Is Lisbon expensive compared to Madrid?",
    "What should I pack for a long weekend in Portugal?",
    "Do I need to tip in restaurants in Portugal?",
    "How do I keep a renovation from going over budget?",
    "Are quartz worktops worth the money?",
    # near deadlines and paperwork
    "What happens if I miss a grant reporting deadline?",
    "When are US federal income taxes normally due?",
    "What documents do I need to renew an adult passport?",
    "How many slides should a ten-minute pitch have?",
    "How do I ask my manager for an extension on a project?",
    "Is the Pomodoro technique actually useful?",
    # near contacts and people
    "How do I ask my landlord to fix a leak without sounding rude?",
    "How do I fix a dripping tap myself?",
    "What should I do first if a pipe bursts?",
    "How do I know if my parrot is sick?",
    "Can parrots really learn to talk, or do they just mimic?",
    "Do I need an accountant if I'm self-employed?",
    "How long should I keep my receipts and bank statements?",
    # near medicine
    "What is a normal blood pressure reading for an adult?",
    "What are the common side effects of statins?",
    "Why shouldn't you drink grapefruit juice with some medications?",
    "What can trigger a migraine?",
    "Is it safe to take ibuprofen and paracetamol together?",
    "What's the difference between type 1 and type 2 diabetes?",
    "How do I get rid of a tension headache without pills?",
    "Can you take expired painkillers?",
    # near tastes
    "What colour goes with a grey sofa?",
    "What flowers are safe to have around cats?",
    "What's the easiest flower to grow on a balcony?",
    "Which Thai dishes aren't too spicy?",
    "What's a good album to get into bluegrass?",
    "How do I keep cut tulips from drooping?",
    "What's the difference between Moroccan and Lebanese food?",
    # near appointments and routines
    "What time do dentists usually open?",
    "Is it normal for gums to bleed after a cleaning?",
    "How long should my kid practise piano every day?",
    "What should I bring to my first yoga class?",
    "How long should a weekly team meeting be?",
    "How do I politely decline a recurring meeting?",
    # near numbers and travel
    "Does the first digit of a hotel room number tell you the floor?",
    "What can I do if my flight is cancelled?",
    "How do I remember where I parked in a big garage?",
    "What's a good way to remember a locker combination?",
    "Can I take my laptop in my carry-on bag?",
    # general knowledge
    "What's the capital of Canada?",
    "Why is the ocean salty?",
    "How long does light from the sun take to reach Earth?",
    "Who wrote One Hundred Years of Solitude?",
    "What's the tallest mountain in Africa?",
    "Why do we have leap years?",
    "What's the difference between weather and climate?",
    "How do vaccines work?",
    # how-to
    "How do I get candle wax off a tablecloth?",
    "How do I remove a stripped screw?",
    "How can I fall asleep faster?",
    "How do I make my tomatoes ripen faster?",
    "Why is my basil plant wilting?",
    "What's the best way to clean a cast iron pan?",
    "How do I tell if an egg is still fresh?",
    "How do I unclog a drain without chemicals?",
    "How do I politely decline a wedding invitation?",
    "How do I write a cover letter for a job I'm slightly underqualified for?",
    # code
    "How do I check if a string is a palindrome in Python?",
    "How do I sort a dictionary by value in Python?",
    "What does a LEFT JOIN do in SQL?",
    "Write a regex that matches a simple email address.",
    "What does the walrus operator do in Python?",
    "How do I rename a branch in git?",
    # maths and definitions
    "What's 15% of 240?",
    "What is the derivative of sin(x)?",
    "How do I calculate compound interest over five years?",
    "Is 91 a prime number?",
    "What does 'per se' mean?",
    "What's the difference between affect and effect?",
    "Can you explain inflation in simple terms?",
    "How do I convert Celsius to Fahrenheit in my head?",
    # opinions and recommendations
    "Is it worth learning Esperanto?",
    "Should I use tabs or spaces?",
    "What's a good book for someone who loved The Martian?",
    "Can you recommend a board game for four adults?",
    "What's a good podcast about history?",
    "Is it bad to charge my phone overnight?",
    "What's a nice gift for a coworker who's leaving?",
    "Is it rude not to tip in Japan?",
    "Write me a haiku about autumn rain.",
    "Should I stretch before or after a run?",
)
