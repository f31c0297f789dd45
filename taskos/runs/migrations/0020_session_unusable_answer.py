# A session whose answers were refused ends `unusable_answer`, a final status of its own;
# the field is widened to 24 characters for it and the statuses still to come.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0019_workspacefile'),
    ]

    operations = [
        migrations.AlterField(
            model_name='session',
            name='status',
            field=models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('waiting', 'Waiting'), ('finished', 'Finished'), ('failed', 'Failed'), ('unusable_answer', 'Unusable Answer'), ('cancelled', 'Cancelled')], db_index=True, default='queued', max_length=24),
        ),
    ]
