"""The start form checks each number by the engine's own range (issue 25 item 6)."""
from __future__ import annotations

import pytest

from taskos.runs.models import Session
from tests.web.test_pages import form_data

pytestmark = pytest.mark.django_db

HUGE = str(10**20)


@pytest.mark.parametrize("field, value, message", [
    ("tool_result_limit", HUGE, f"at most 100000000 tokens (got {HUGE})"),
    ("max_rounds", HUGE, f"max_rounds must be at least 1 and at most 1000 (got {HUGE})"),
    ("max_turns", HUGE, "less than or equal to 100000"),
    ("window", HUGE, "less than or equal to 100000000"),
])
def test_the_start_form_refuses_numbers_out_of_range(ann_client, field, value, message):
    response = ann_client.post("/sessions/new", form_data(**{field: value}))
    assert response.status_code == 400
    assert message in " ".join(response.context["form"].errors[field])
    assert not Session.objects.exists()
