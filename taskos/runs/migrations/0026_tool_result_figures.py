"""SessionEvent.figures of the tool results stored before their figures were kept: the
payload less its preview and conclusions (the keys written out as they were then, as in
0025, which this repeats for one more type)."""

from django.db import migrations

KIND, BULK = "TOOL_RESULT", ("preview", "conclusions")


def fill_figures(apps, schema_editor):
    connection = schema_editor.connection
    table = connection.ops.quote_name("runs_sessionevent")
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            paths = ", ".join(f"'$.\"{key}\"'" for key in BULK)
            cursor.execute(f"UPDATE {table} SET figures = json_remove(payload, {paths}) "
                           "WHERE type = %s AND figures IS NULL", [KIND])
        elif connection.vendor == "postgresql":
            cursor.execute(f"UPDATE {table} SET figures = payload - %s::text[] "
                           "WHERE type = %s AND figures IS NULL", [list(BULK), KIND])
        else:
            events = apps.get_model("runs", "SessionEvent")
            for row in events._base_manager.filter(type=KIND, figures__isnull=True).iterator():
                events._base_manager.filter(pk=row.pk).update(figures={
                    key: value for key, value in row.payload.items() if key not in BULK})


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0025_sessionevent_figures'),
    ]

    operations = [
        migrations.RunPython(fill_figures, migrations.RunPython.noop, elidable=True),
    ]
