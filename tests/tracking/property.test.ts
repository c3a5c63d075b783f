// Journal-driven vs full-scan incrementals under the fanotify backend (see property-runner.ts).
import { definePropertyTest } from './property-runner.js';

definePropertyTest('fanotify');
