"""Prompt templates from an example's fields, and a system prompt per arm."""

import pytest

from gittinseval.live.tasks.prompts import PromptTemplate, chat_messages


def test_template_fills_fields():
    template = PromptTemplate("Q: {question}\nChoices: {choices}\nReply with {{ANSWER: X}}.")
    assert template.fields == ("question", "choices")
    example = {"question": "2+2?", "choices": "A) 3 B) 4", "answer": "B"}
    assert template.render(example) == "Q: 2+2?\nChoices: A) 3 B) 4\nReply with {ANSWER: X}."
    assert PromptTemplate("{x:.2f} and {x}").render({"x": 1.5}) == "1.50 and 1.5"
    assert PromptTemplate().render({"prompt": "hello"}) == "hello"


def test_missing_field_names_the_field_and_example():
    template = PromptTemplate("Q: {question}")
    with pytest.raises(ValueError, match=r"needs field 'question', missing from example \{\"prompt\": \"hi\"\}"):
        template.render({"prompt": "hi"})


@pytest.mark.parametrize(
    ("template", "match"),
    [
        ("{a[0]}", "must be a field name"),
        ("{a.b}", "must be a field name"),
        ("{}", "must be a field name"),
        ("Q: {question", "malformed"),
    ],
)
def test_bad_templates_are_refused(template, match):
    with pytest.raises(ValueError, match=match):
        PromptTemplate(template)


def test_chat_messages_put_the_arm_system_prompt_first():
    template = PromptTemplate("{prompt}")
    example = {"prompt": "What is 2+2?"}
    assert chat_messages(template, example, "Answer with a number.") == [
        {"role": "system", "content": "Answer with a number."},
        {"role": "user", "content": "What is 2+2?"},
    ]
    assert chat_messages(template, example) == [{"role": "user", "content": "What is 2+2?"}]
    # A system prompt is sent as written: braces in it are not placeholders.
    assert chat_messages(template, example, "Reply as {json}")[0]["content"] == "Reply as {json}"
