from gittinseval.data.catalog import main

if __name__ == "__main__":
    main()
