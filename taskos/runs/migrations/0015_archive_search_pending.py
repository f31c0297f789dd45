"""Archive rows the engine wrote are indexed by the session's next search (issue 8).

A nullable column added without a default: SQLite adds it in place (no table rebuild, so
migration 0003's FTS5 triggers stay), and rows archived before are NULL, i.e. indexed.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0014_profile_weak_model_requests'),
    ]

    operations = [
        migrations.AddField(
            model_name='archivedturn',
            name='search_pending',
            field=models.BooleanField(editable=False, null=True),
        ),
        migrations.AddIndex(
            model_name='archivedturn',
            index=models.Index(condition=models.Q(('search_pending', True)), fields=['session'], name='runs_archive_search_pending'),
        ),
    ]
