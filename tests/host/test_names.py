"""Namespaced tool names (issue 8, "One tool list for the model"): one flat name per
(server, tool), in the character set model APIs accept, the same whatever the order,
within 64 characters, mapped back exactly."""

from __future__ import annotations

import itertools
import random

from modelctx.host import NAME_PATTERN, NameMap, namespaced


def test_a_name_is_the_server_and_the_tool_joined_by_an_underscore():
    assert namespaced("weather", "forecast") == "weather_forecast"
    assert NameMap([("weather", "forecast")]).resolve("weather_forecast") == ("weather", "forecast")


def test_characters_model_apis_refuse_become_underscores():
    name = namespaced("my server", "get.weather/now")
    assert name == "my_server_get_weather_now"
    assert NAME_PATTERN.fullmatch(name)


def test_a_name_over_64_characters_keeps_both_parts_and_a_hash_of_the_full_names():
    server, tool = "search-engine", "find_" + "x" * 80
    name = namespaced(server, tool)

    assert NAME_PATTERN.fullmatch(name) and len(name) == 64
    assert name.startswith("search-engine_find_xxx")
    # Two tools that differ only past the cut still get different names.
    assert namespaced(server, tool + "a") != namespaced(server, tool + "b")
    # A long server name is shortened, never the hash.
    long_server = namespaced("s" * 100, "t")
    assert NAME_PATTERN.fullmatch(long_server) and long_server.startswith("s" * 20 + "_t_")


def test_a_collision_is_resolved_the_same_way_in_every_order():
    pairs = [("a_b", "c"), ("a", "b_c"), ("a", "d"), ("x", "y")]
    maps = [NameMap(order) for order in itertools.permutations(pairs)]
    names = {pair: maps[0].name_for(*pair) for pair in pairs}

    for other in maps[1:]:
        assert {pair: other.name_for(*pair) for pair in pairs} == names
    # Neither side of the collision keeps the plain name; the others are untouched.
    assert "a_b_c" not in maps[0]
    assert names[("a", "d")] == "a_d" and names[("x", "y")] == "x_y"
    assert names[("a_b", "c")] != names[("a", "b_c")]
    for pair, name in names.items():
        assert NAME_PATTERN.fullmatch(name)
        assert maps[0].resolve(name) == pair


def test_names_that_clean_to_the_same_text_are_told_apart_and_map_back_exactly():
    pairs = [("s", "get.weather"), ("s", "get_weather"), ("s", "get weather")]
    names = NameMap(reversed(pairs))

    assert len({names.name_for(*pair) for pair in pairs}) == 3
    for pair in pairs:
        assert names.resolve(names.name_for(*pair)) == pair
    assert names.resolve("s_nothing") is None


def test_many_random_pairs_get_unique_valid_names_whatever_the_order():
    rng = random.Random(8)
    alphabet = "ab_.-"
    pairs = {
        ("".join(rng.choices(alphabet, k=rng.randint(1, 40))), "".join(rng.choices(alphabet, k=rng.randint(1, 70))))
        for _ in range(400)
    }
    ordered = sorted(pairs)
    shuffled = ordered[:]
    rng.shuffle(shuffled)
    first, second = NameMap(ordered), NameMap(shuffled)

    assert len(first) == len(pairs)
    for pair in pairs:
        name = first.name_for(*pair)
        assert NAME_PATTERN.fullmatch(name), name
        assert second.name_for(*pair) == name
        assert first.resolve(name) == pair
