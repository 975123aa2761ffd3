"""Tests for localpager.core.keywords: bookmark keywords must be short, safe and page-specific."""

from __future__ import annotations

import pytest

from localpager.core.keywords import DEFAULT_KEYWORDS, DEFAULT_KEYWORDS_PER_PAGE, STRATEGIES, extract_keywords
from localpager.core.text import STOPWORDS, tokenize_words

ALLERGY = (
    "user: I'm allergic to peanuts, carry an EpiPen.\n"
    "assistant: Noted! I'll remember your peanut allergy and the EpiPen."
)
RENT = (
    "user: The rent is $1,200 and due on March 3.\n"
    "assistant: Sure, I'll remind you on Friday at 3:30pm."
)
CONTACT = (
    "user: Email me at bob.smith@example.com or call (555) 123-4567 [urgent]: see "
    "https://www.example.org/x, then {reply}; thanks\n"
    "assistant: Will do."
)
FILLER = "user: ok thanks\nassistant: lol"
SPEAKERS = (
    "Caroline: I went to the support group with Jon yesterday.\n"
    "Melanie: How was it? Did Jon like the pottery class?\n"
    "Caroline: He loved it, and Dr. Patel ran it.\n"
    "Melanie: That sounds lovely."
)
CHINESE = [
    "user: 我对花生过敏，出门一定会带肾上腺素笔。\n"
    "assistant: 好的，我记住了：你对花生过敏，点餐时要避开花生酱。",
    "user: 下周三下午3点我们在三楼会议室开会，讨论明年的预算。\n"
    "assistant: 好的，下周三下午3点，三楼会议室，我会提醒你。",
]
JAPANESE = (
    "user: ピーナッツ アレルギーがあります。エピペンを持っています。\n"
    "assistant: 了解しました。来週の水曜日の会議でも気をつけます。"
)
PAGES = [ALLERGY, RENT, CONTACT, FILLER, SPEAKERS, *CHINESE, JAPANESE, ""]
FORBIDDEN = set(",[]:\n\r")


def lowered(keywords: list[str]) -> set[str]:
    return {kw.lower() for kw in keywords}


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@pytest.mark.parametrize("k", [1, 3, DEFAULT_KEYWORDS_PER_PAGE])
def test_every_strategy_gives_one_to_k_keywords_and_none_for_an_empty_page(
    strategy: str, k: int
) -> None:
    result = extract_keywords(PAGES, strategy, k=k)
    assert len(result) == len(PAGES)
    for page, keywords in zip(PAGES, result):
        if page:
            assert 1 <= len(keywords) <= k, (page, keywords)
        else:
            assert keywords == []


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_keywords_are_short_safe_and_unique(strategy: str) -> None:
    for keywords in extract_keywords(PAGES, strategy):
        assert len(lowered(keywords)) == len(keywords)
        for kw in keywords:
            assert kw and kw == kw.strip() and len(kw) <= 40
            assert not FORBIDDEN & set(kw), kw


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_blank_and_missing_pages(strategy: str) -> None:
    assert extract_keywords([], strategy) == []
    assert extract_keywords(["", "   \n "], strategy) == [[], []]


def test_defaults() -> None:
    assert DEFAULT_KEYWORDS == "heuristic" and DEFAULT_KEYWORDS_PER_PAGE == 4
    assert extract_keywords([ALLERGY]) == extract_keywords([ALLERGY], "heuristic", k=4)


LONG_PAGE = "user: " + " ".join(
    "apple banana cherry dragonfruit elderberry fig grape honeydew kiwi lemon mango nectarine "
    "orange papaya quince raspberry strawberry tangerine ugli vanilla watermelon yam zucchini "
    "almond basil cumin dill fennel ginger".split()
)


def test_random_is_deterministic_per_seed_and_varies_across_seeds() -> None:
    first = extract_keywords([LONG_PAGE], "random", seed=7)
    assert first == extract_keywords([LONG_PAGE], "random", seed=7)
    outcomes = {tuple(extract_keywords([LONG_PAGE], "random", seed=s)[0]) for s in range(5)}
    assert len(outcomes) > 1


def test_random_skips_stopwords_and_speaker_prefixes() -> None:
    for seed in range(10):
        (keywords,) = extract_keywords([ALLERGY], "random", k=4, seed=seed)
        assert len(keywords) == 4
        assert not lowered(keywords) & (STOPWORDS | {"user", "assistant"})


@pytest.mark.parametrize("strategy", ["heuristic", "tfidf"])
def test_allergy_page_names_the_allergy_not_the_roles(strategy: str) -> None:
    (keywords,) = extract_keywords([ALLERGY], strategy)
    assert lowered(keywords) & {"peanut", "peanuts", "epipen"}
    assert "EpiPen" in keywords  # mixed case is kept as written
    assert not lowered(keywords) & {"user", "assistant", "the", "noted", "i'm"}


def test_money_dates_and_times_are_extracted_whole() -> None:
    (keywords,) = extract_keywords([RENT], "heuristic", k=6)
    assert "$1200" in keywords
    assert "March 3" in keywords
    assert {"Friday", "3.30pm"} & set(keywords)
    assert not lowered(keywords) & {"the", "sure"}


def test_what_the_user_states_outranks_what_the_assistant_says() -> None:
    """The user's own statement is what a later question asks for; the assistant's reply is not."""
    (keywords,) = extract_keywords([RENT], "heuristic", k=2)
    assert set(keywords) == {"$1200", "March 3"}
    page = ("user: Would toasted nuts work on the risotto? The risotto is for Saturday.\n"
            "assistant: Toasted hazelnuts work well on risotto, toast them first.\n"
            "user: By the way, I'm allergic to penicillin.\nassistant: Noted.")
    (keywords,) = extract_keywords([page], "heuristic", k=2)
    assert "penicillin" in keywords


def test_a_name_and_its_email_take_one_keyword() -> None:
    page = "user: My accountant is Ingrid Novak, email ingrid.novak@example.com. I take 10 mg of losartan."
    (keywords,) = extract_keywords([page], "heuristic", k=3)
    assert "Ingrid Novak" in keywords and "ingrid.novak@example.com" not in keywords
    assert "10 mg" in keywords  # a number with its unit, not a bare "10"


def test_money_in_words_and_iso_dates() -> None:
    page = "user: I paid 1200 dollars on 2024-05-01 for the sofa."
    (keywords,) = extract_keywords([page], "heuristic")
    assert {"1200 dollars", "2024-05-01"} <= set(keywords)


def test_contacts_are_kept_and_cleaned() -> None:
    (keywords,) = extract_keywords([CONTACT], "heuristic", k=6)
    assert "bob.smith@example.com" in keywords
    assert "example.org" in keywords
    assert "555 123-4567" in keywords


def test_sentence_initial_common_word_is_not_taken_for_a_name() -> None:
    page = "user: Honestly the Beatles are fine. Perhaps Jude agrees. Yesterday was long."
    (keywords,) = extract_keywords([page], "heuristic")
    assert "Beatles" in keywords
    assert not lowered(keywords) & {"honestly", "perhaps", "yesterday", "the"}


def test_capitals_owed_to_a_sentence_start_do_not_outrank_names() -> None:
    page = "user: Bring snacks. Cookies are fine. We met Jon at the Louvre."
    (keywords,) = extract_keywords([page], "heuristic")
    assert keywords[:2] == ["Jon", "Louvre"]
    assert "Cookies" not in keywords and "Bring" not in keywords


def test_speaker_names_opening_lines_are_noise_but_mentioned_names_count() -> None:
    (keywords,) = extract_keywords([SPEAKERS], "heuristic")
    assert "Jon" in keywords
    assert "Dr Patel" in keywords
    assert not lowered(keywords) & {"caroline", "melanie"}


def test_a_colon_inside_a_continuation_line_is_not_a_speaker() -> None:
    page = "user: Here is the recipe\nIngredients: flour and saffron\nassistant: Lovely."
    (keywords,) = extract_keywords([page], "heuristic", k=4)
    assert "Ingredients" in keywords or "ingredients" in keywords
    assert "saffron" in keywords


def test_tfidf_prefers_a_term_unique_to_the_page() -> None:
    pages = [
        "user: I watered the garden.\nassistant: The garden will thank you.",
        "user: My garden needs a violin concert.\nassistant: A violin in the garden!",
        "user: The garden is muddy.\nassistant: Wear boots in the garden.",
    ]
    assert extract_keywords(pages, "tfidf", k=1)[1] == ["violin"]
    assert extract_keywords(pages, "tfidf", k=2)[1] == ["violin", "concert"]


def test_tfidf_works_on_a_single_page() -> None:
    (keywords,) = extract_keywords([RENT], "tfidf")
    assert 1 <= len(keywords) <= DEFAULT_KEYWORDS_PER_PAGE
    assert "$1200" in keywords


@pytest.mark.parametrize("strategy", ["heuristic", "tfidf"])
def test_chinese_keywords_come_from_the_page_and_name_the_allergy(strategy: str) -> None:
    allergy, meeting = extract_keywords(CHINESE, strategy)
    for page, keywords in zip(CHINESE, (allergy, meeting)):
        assert keywords and all(kw in page for kw in keywords), keywords
    assert any("花生" in kw or "过敏" in kw for kw in allergy)
    assert any("3点" in kw for kw in meeting)
    assert any("周三" in kw for kw in meeting)


@pytest.mark.parametrize("strategy", ["heuristic", "tfidf"])
def test_japanese_katakana_words_are_kept_whole(strategy: str) -> None:
    (keywords,) = extract_keywords([JAPANESE], strategy)
    assert "ピーナッツ" in keywords
    assert all(kw in JAPANESE for kw in keywords)


def test_unknown_strategy_names_the_known_ones() -> None:
    with pytest.raises(ValueError) as excinfo:
        extract_keywords([ALLERGY], "bert")
    for name in ("heuristic", "random", "tfidf", "bert"):
        assert name in str(excinfo.value)


def test_k_below_one_is_rejected() -> None:
    with pytest.raises(ValueError):
        extract_keywords([ALLERGY], k=0)


def test_tokenize_words_lowercases_latin_and_bigrams_cjk() -> None:
    assert tokenize_words("I'm allergic to Caroline's PEANUTS") == [
        "i'm",
        "allergic",
        "to",
        "caroline",
        "peanuts",
    ]
    assert tokenize_words("花生过敏") == ["花生", "生过", "过敏"]
    assert tokenize_words("猫が好き") == ["猫が", "が好", "好き"]
    assert tokenize_words("猫 犬") == ["猫", "犬"]
    assert tokenize_words("rent $1,200, 3.5 kg") == ["rent", "1200", "3.5", "kg"]
    assert tokenize_words("iPhone手机") == ["iphone", "手机"]
    assert tokenize_words("") == []


def test_stopwords_cover_english_and_chat_filler() -> None:
    for word in ("the", "and", "yeah", "okay", "thanks", "sure", "really", "lol", "great"):
        assert word in STOPWORDS
    assert "peanut" not in STOPWORDS and "user" not in STOPWORDS
