"""SessionEvent.figures: a MODEL_CALL's or a compaction's payload less its bulky keys, and
the rows stored before it filled in.

The bulky keys are written out here as they were when this column came, not imported:
a migration replays the same change whatever the models say later. A row left NULL
(another database vendor, or one written while this ran) is still read, from its payload."""

from django.db import migrations, models

BULK_KEYS = {
    "MODEL_CALL": ("messages", "request", "reply", "message_parts", "message_meta"),
    "COMPACTION": ("summary_before", "summary_after", "digests"),
}


def fill_figures(apps, schema_editor):
    connection = schema_editor.connection
    table = connection.ops.quote_name("runs_sessionevent")
    with connection.cursor() as cursor:
        for kind, keys in BULK_KEYS.items():
            if connection.vendor == "sqlite":
                paths = ", ".join(f"'$.\"{key}\"'" for key in keys)
                cursor.execute(f"UPDATE {table} SET figures = json_remove(payload, {paths}) "
                               "WHERE type = %s AND figures IS NULL", [kind])
            elif connection.vendor == "postgresql":
                cursor.execute(f"UPDATE {table} SET figures = payload - %s::text[] "
                               "WHERE type = %s AND figures IS NULL", [list(keys), kind])
            else:
                events = apps.get_model("runs", "SessionEvent")
                for row in events._base_manager.filter(type=kind, figures__isnull=True).iterator():
                    events._base_manager.filter(pk=row.pk).update(figures={
                        key: value for key, value in row.payload.items() if key not in keys})


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0024_profile_cache_marks'),
    ]

    operations = [
        migrations.AddField(
            model_name='sessionevent',
            name='figures',
            field=models.JSONField(blank=True, editable=False, null=True),
        ),
        migrations.RunPython(fill_figures, migrations.RunPython.noop, elidable=True),
    ]
