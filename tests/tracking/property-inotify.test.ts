// Journal-driven vs full-scan incrementals under the inotify backend (see property-runner.ts).
import { definePropertyTest } from './property-runner.js';

definePropertyTest('inotify');
