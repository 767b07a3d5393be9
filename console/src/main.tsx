/**
 * Entry point of the account holder's console (built by Vite into
 * dist/console/, served by the sidecar at /console/).
 */
import { render } from 'preact';
import { App } from './app.js';
import './styles.css';

render(<App />, document.getElementById('app')!);
