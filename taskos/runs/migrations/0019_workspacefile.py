# The person's files in a workspace (feature T9): who brought each and whether the agent
# has been told.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0018_profile_model_check'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='WorkspaceFile',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('path', models.CharField(max_length=1024)),
                ('size', models.PositiveBigIntegerField()),
                ('origin', models.CharField(choices=[('upload', 'Upload'), ('command_line', 'Command Line'), ('copy', 'Copy')], default='upload', max_length=16)),
                ('after_turn', models.PositiveIntegerField(default=0)),
                ('added_at', models.DateTimeField(auto_now_add=True)),
                ('announced_turn', models.PositiveIntegerField(blank=True, editable=False, null=True)),
                ('added_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='workspace_files', to='runs.session')),
            ],
            options={
                'ordering': ['id'],
                'indexes': [models.Index(condition=models.Q(('announced_turn', None)), fields=['session'], name='runs_wsfile_unannounced')],
            },
        ),
    ]
