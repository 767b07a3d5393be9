/** Module declarations for the console's build: style sheets are imported for their side effect (Vite bundles them). */
declare module '*.css';
